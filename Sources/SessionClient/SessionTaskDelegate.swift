import EventLoop
import HTTPWire

/// Events of one task, delivered on the session's loop in this order: `taskCanSendBody` (if the request
/// has a body), informational heads, the response head, body slices, completion. After completion
/// nothing more arrives.
public protocol SessionTaskDelegate: AnyObject {
    /// The request head is on its way; write the body into `task.bodyOutput`, then call `finishBody()`.
    func taskCanSendBody(_ task: SessionTask)
    /// `task.bodyOutput` has drained: more body may be written.
    func taskBodyDrained(_ task: SessionTask)
    /// A 1xx other than 101 (e.g. 100 Continue, 103 Early Hints).
    func task(_ task: SessionTask, didReceiveInformational head: ResponseHead)
    /// The final response head (or 101, after which `takeUpgradedStream()` gives the raw connection).
    func task(_ task: SessionTask, didReceiveResponse head: ResponseHead)
    /// `count` body bytes are at the front of `source`: move or drain exactly that many.
    func task(_ task: SessionTask, didReceiveBody source: Buffer, count: Int)
    /// The response ended (`nil`) or the exchange failed.
    func task(_ task: SessionTask, didCompleteWith error: SessionError?)
}
