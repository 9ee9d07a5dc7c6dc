/// The clock (`ProxyClock`) comes with the loop that runs on it: whoever imports the event loop
/// also sees the clock it is given.
@_exported import Timekeeping
