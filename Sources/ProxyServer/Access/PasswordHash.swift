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
        let data = UnsafeMutablePointer<crypt_data>.allocate(capacity: 1)
        defer {
            memset(data, 0, MemoryLayout<crypt_data>.size)
            data.deallocate()
        }
        memset(data, 0, MemoryLayout<crypt_data>.size)
        guard let result = crypt_rn(password, setting, data, Int32(MemoryLayout<crypt_data>.size)),
              result.pointee != 0x2A /* "*": failure token */ else { return nil }
        return String(cString: result)
    }

    public static func verify(_ password: String, against hash: String) -> Bool {
        let data = UnsafeMutablePointer<crypt_data>.allocate(capacity: 1)
        defer {
            // The scratch area held the password: clear it before giving it back.
            memset(data, 0, MemoryLayout<crypt_data>.size)
            data.deallocate()
        }
        memset(data, 0, MemoryLayout<crypt_data>.size)
        guard let result = crypt_rn(password, hash, data, Int32(MemoryLayout<crypt_data>.size)) else { return false }
        let computed = Array(String(cString: result).utf8)
        let stored = Array(hash.utf8)
        guard computed.count == stored.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(computed, stored) { difference |= a ^ b }
        return difference == 0
    }
}
