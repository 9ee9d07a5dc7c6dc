import CCrypt
import Glibc

/// Checks a password against a stored crypt(3)-style hash with libcrypt. Deliberately slow for
/// bcrypt and SHA-crypt, so never called on an event loop (see `ProxyAuthenticator`).
public enum PasswordHash {
    /// A new hash of `password` with a random salt: bcrypt (`$2b$`, cost = log2 rounds) or
    /// SHA-512-crypt (`$6$`, cost = rounds; 0 picks the default). nil if libcrypt refuses.
    public static func make(_ password: String, bcrypt: Bool, cost: Int) -> String? {
        var setting = [CChar](repeating: 0, count: Int(CRYPT_GENSALT_OUTPUT_SIZE))
        guard crypt_gensalt_rn(bcrypt ? "$2b$" : "$6$", UInt(cost), nil, 0, &setting, Int32(setting.count)) != nil else {
            return nil
        }
        return withScratch { data in
            guard let result = crypt_rn(password, setting, data, Int32(MemoryLayout<crypt_data>.size)),
                  result.pointee != 0x2A /* "*": failure token */ else { return nil }
            return String(cString: result)
        }
    }

    public static func verify(_ password: String, against hash: String) -> Bool {
        guard let computed = withScratch({ data in
            crypt_rn(password, hash, data, Int32(MemoryLayout<crypt_data>.size)).map { Array(String(cString: $0).utf8) }
        }) else { return false }
        return equalInConstantTime(computed, Array(hash.utf8))
    }

    /// libcrypt's zeroed scratch area for one call, cleared again afterwards (it held the password).
    private static func withScratch<R>(_ body: (UnsafeMutablePointer<crypt_data>) -> R) -> R {
        let data = UnsafeMutablePointer<crypt_data>.allocate(capacity: 1)
        memset(data, 0, MemoryLayout<crypt_data>.size)
        defer {
            memset(data, 0, MemoryLayout<crypt_data>.size)
            data.deallocate()
        }
        return body(data)
    }
}

/// Secrets compared without an early exit, so timing does not tell how much of a guess was right
/// (the length may show).
func equalInConstantTime(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for (x, y) in zip(a, b) { difference |= x ^ y }
    return difference == 0
}
