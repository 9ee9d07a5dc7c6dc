import Testing
@testable import Registries

// Small documents shaped like what the registries send.

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

enum CratesFixtures {
    /// crates.io's sparse index `config.json`.
    static let config = """
        {
          "dl": "https://static.crates.io/crates",
          "api": "https://crates.io"
        }
        """
}
