import CSignals
import Glibc
import Logging

/// Makes crash signals sent from outside (kill -SEGV, -BUS, -ABRT...) end the process once the
/// runtime has printed its backtrace, as real crashes do, instead of letting it carry on.
func makeCrashSignalsFatal(logger: Logger) {
    if larder_make_crash_signals_fatal() != 0 {
        logger.warning("cannot wrap the crash signal handlers: errno \(errno)")
    }
}
