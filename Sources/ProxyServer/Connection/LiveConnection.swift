import SessionClient

/// The resources a live client connection's states own (see `ConnectionResources`).
enum LiveConnection: ConnectionResources {
    typealias Origin = OriginRelay
    typealias StoredBody = StoredBodySender
    typealias Follower = CollapseFollower
    typealias Opener = TunnelOpener
    typealias Tunnel = ByteTunnel
}

/// The tunnel type under a name the resource list above can use for its own `Tunnel`.
typealias ByteTunnel = Tunnel
