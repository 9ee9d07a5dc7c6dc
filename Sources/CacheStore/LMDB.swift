import CLMDB
import Glibc

/// An LMDB return code that is not success, with LMDB's own words for it.
public struct LMDBError: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public let operation: String
    /// Our own words, when LMDB's for `code` would not say what happened.
    public var reason: String? = nil
    public var description: String { reason ?? "\(operation): \(String(cString: mdb_strerror(code)))" }
    var isMapFull: Bool { code == MDB_MAP_FULL }

    /// The files are proven damaged or of another format, so moving them aside loses nothing that
    /// could be read. Anything else (permissions, a file where the directory should be, I/O errors)
    /// says nothing about the files and must not cost the operator the cache.
    var provesDamage: Bool {
        code == MDB_CORRUPTED || code == MDB_PAGE_NOTFOUND || code == MDB_INVALID || code == MDB_VERSION_MISMATCH
    }
}

@inline(__always)
func check(_ rc: Int32, _ operation: @autoclosure () -> String) throws(LMDBError) {
    if rc != 0 { throw LMDBError(code: rc, operation: operation()) }
}

/// Calls `body` with an `MDB_val` pointing at `bytes` (valid only inside `body`).
@inline(__always)
func withValue<R>(_ bytes: [UInt8], _ body: (inout MDB_val) throws(LMDBError) -> R) throws(LMDBError) -> R {
    let result = bytes.withUnsafeBytes { raw -> Result<R, LMDBError> in
        var v = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
        return Result { () throws(LMDBError) -> R in try body(&v) }
    }
    return try result.get()
}

extension MDB_val {
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: mv_data, count: mv_size) }
}

/// A write transaction on one thread (the writer's); aborted unless committed.
struct WriteTransaction: ~Copyable {
    let txn: OpaquePointer
    private var finished = false

    init(env: OpaquePointer) throws(LMDBError) {
        var t: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &t), "mdb_txn_begin")
        txn = t!
    }

    consuming func commit() throws(LMDBError) {
        finished = true
        try check(mdb_txn_commit(txn), "mdb_txn_commit")
    }

    consuming func abort() {
        finished = true
        mdb_txn_abort(txn)
    }

    deinit { if !finished { mdb_txn_abort(txn) } }

    func put(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) throws(LMDBError) {
        try withValue(key) { (k: inout MDB_val) throws(LMDBError) in
            try withValue(value) { (v: inout MDB_val) throws(LMDBError) in
                try check(mdb_put(txn, dbi, &k, &v, 0), "mdb_put")
            }
        }
    }

    /// Stores `count` bytes under `key`, written in place by `fill` into the space LMDB reserves
    /// (no copy of the value is made first). `appending`: the key most likely sorts after every
    /// key of the table, so LMDB is asked to put it at the end without a search (`MDB_APPEND`,
    /// which also fills the last page rather than splitting it in half); a key that does not is
    /// put the usual way.
    func put(_ dbi: MDB_dbi, _ key: [UInt8], reserving count: Int, appending: Bool = false,
             _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws(LMDBError) {
        try withValue(key) { (k: inout MDB_val) throws(LMDBError) in
            var v = MDB_val(mv_size: count, mv_data: nil)
            var rc = appending ? mdb_put(txn, dbi, &k, &v, UInt32(MDB_RESERVE | MDB_APPEND)) : MDB_KEYEXIST
            if rc == MDB_KEYEXIST { rc = mdb_put(txn, dbi, &k, &v, UInt32(MDB_RESERVE)) }
            try check(rc, "mdb_put")
            fill(UnsafeMutableRawBufferPointer(start: v.mv_data, count: count))
        }
    }

    /// Deletes `key`; a missing key is not an error.
    func delete(_ dbi: MDB_dbi, _ key: [UInt8]) throws(LMDBError) {
        try withValue(key) { (k: inout MDB_val) throws(LMDBError) in
            let rc = mdb_del(txn, dbi, &k, nil)
            if rc != MDB_NOTFOUND { try check(rc, "mdb_del") }
        }
    }

    func get(_ dbi: MDB_dbi, _ key: [UInt8]) -> [UInt8]? { lookUp(txn, dbi, key).map { Array($0.bytes) } }

    func record(_ dbi: MDB_dbi, _ key: [UInt8]) -> EntryRecord? {
        lookUp(txn, dbi, key).flatMap { RecordCodec.entry($0.bytes) }
    }

    /// A URL's variant spec: none, bytes that do not decode, or the spec.
    func spec(_ dbi: MDB_dbi, _ key: [UInt8]) -> SpecLookup {
        guard let v = lookUp(txn, dbi, key) else { return .absent }
        return RecordCodec.variant(v.bytes).map { .found($0) } ?? .damaged
    }

    enum SpecLookup {
        case absent, damaged
        case found(VariantSpec)
    }

    /// Visits keys from `start` (inclusive) in order while `body` returns true.
    func scan(_ dbi: MDB_dbi, from start: [UInt8]?, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool) throws(LMDBError) {
        try scanCursor(txn, dbi, from: start, body)
    }
}

/// The value under `key`, pointing into the map: valid until `txn` ends or writes again.
func lookUp(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: [UInt8]) -> MDB_val? {
    key.withUnsafeBytes { lookUp(txn, dbi, $0) }
}

func lookUp(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: UnsafeRawBufferPointer) -> MDB_val? {
    var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
    var v = MDB_val()
    return mdb_get(txn, dbi, &k, &v) == 0 ? v : nil
}

/// Cursor walk shared by read and write transactions.
func scanCursor(_ txn: OpaquePointer, _ dbi: MDB_dbi, from start: [UInt8]?,
                _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool) throws(LMDBError) {
    var cursor: OpaquePointer?
    try check(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open")
    defer { mdb_cursor_close(cursor) }
    var k = MDB_val()
    var v = MDB_val()
    var rc: Int32
    if let start {
        rc = start.withUnsafeBytes { raw -> Int32 in
            k = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
            return mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE)
        }
    } else {
        rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST)
    }
    while rc == 0 {
        if !body(k.bytes, v.bytes) { return }
        rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
    }
    if rc != MDB_NOTFOUND { try check(rc, "mdb_cursor_get") }
}
