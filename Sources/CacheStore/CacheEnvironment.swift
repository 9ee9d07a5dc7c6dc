import CLMDB
import Glibc

/// The LMDB environment holding the cache: one per process, shared by every worker thread
/// (`MDB_NOTLS`, so a thread may hold several read transactions). The cache proper builds on it.
public final class CacheEnvironment: @unchecked Sendable {
    private let env: OpaquePointer
    private let dbi: MDB_dbi
    public let directory: String

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Opens (creating when needed) the environment in `directory`.
    /// - Parameter mapSize: the most bytes the cache file may grow to (reserved address space only).
    public init(directory: String, mapSize: Int = 1 << 30, maxReaders: UInt32 = 512) throws(Failure) {
        self.directory = directory
        if mkdir(directory, 0o755) != 0, errno != EEXIST {
            throw Failure(description: "cannot create cache directory \(directory): \(String(cString: strerror(errno)))")
        }
        var e: OpaquePointer?
        guard mdb_env_create(&e) == 0, let e else { throw Failure(description: "mdb_env_create failed") }
        mdb_env_set_mapsize(e, mapSize)
        mdb_env_set_maxreaders(e, maxReaders)
        mdb_env_set_maxdbs(e, 8)
        let rc = mdb_env_open(e, directory, UInt32(MDB_NOTLS | MDB_NOSYNC), 0o644)
        guard rc == 0 else {
            mdb_env_close(e)
            throw Failure(description: "cannot open cache in \(directory): \(String(cString: mdb_strerror(rc)))")
        }
        env = e
        var txn: OpaquePointer?
        var handle: MDB_dbi = 0
        guard mdb_txn_begin(e, nil, 0, &txn) == 0,
              mdb_dbi_open(txn, "entries", UInt32(MDB_CREATE), &handle) == 0,
              mdb_txn_commit(txn) == 0 else {
            mdb_env_close(e)
            throw Failure(description: "cannot create the cache database in \(directory)")
        }
        dbi = handle
    }

    deinit { mdb_env_close(env) }

    /// Stores `value` under `key` in one committed write transaction.
    public func put(_ key: [UInt8], _ value: [UInt8]) throws(Failure) {
        var txn: OpaquePointer?
        guard mdb_txn_begin(env, nil, 0, &txn) == 0 else { throw Failure(description: "mdb_txn_begin failed") }
        var rc: Int32 = 0
        key.withUnsafeBytes { k in
            value.withUnsafeBytes { v in
                var mk = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                var mv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                rc = mdb_put(txn, dbi, &mk, &mv, 0)
            }
        }
        guard rc == 0 else {
            mdb_txn_abort(txn)
            throw Failure(description: String(cString: mdb_strerror(rc)))
        }
        rc = mdb_txn_commit(txn)
        guard rc == 0 else { throw Failure(description: String(cString: mdb_strerror(rc))) }
    }

    /// A copy of the value under `key`, if any.
    public func get(_ key: [UInt8]) -> [UInt8]? {
        var txn: OpaquePointer?
        guard mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0 else { return nil }
        defer { mdb_txn_abort(txn) }
        return key.withUnsafeBytes { k -> [UInt8]? in
            var mk = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            var mv = MDB_val()
            guard mdb_get(txn, dbi, &mk, &mv) == 0 else { return nil }
            return Array(UnsafeRawBufferPointer(start: mv.mv_data, count: mv.mv_size))
        }
    }

    /// Number of stored entries.
    public var entryCount: Int {
        var txn: OpaquePointer?
        guard mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0 else { return 0 }
        defer { mdb_txn_abort(txn) }
        var stat = MDB_stat()
        guard mdb_stat(txn, dbi, &stat) == 0 else { return 0 }
        return stat.ms_entries
    }
}
