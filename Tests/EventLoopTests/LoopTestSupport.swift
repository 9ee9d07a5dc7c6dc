import Glibc
@testable import EventLoop

/// A connected pair of non-blocking Unix sockets, for streams and splices driven by a real loop.
func socketPair(_ type: __socket_type = SOCK_STREAM) -> (Int32, Int32) {
    var fds: [Int32] = [0, 0]
    let rc = socketpair(AF_UNIX, Int32(type.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds)
    precondition(rc == 0)
    return (fds[0], fds[1])
}

/// Runs `loop` until something stops it, or `seconds` have passed.
func runLoop(_ loop: EventLoop, atMost seconds: Double) {
    let guardTimer = Timer(loop: loop) { loop.stop() }
    guardTimer.schedule(after: seconds)
    loop.run()
    guardTimer.cancel()
}
