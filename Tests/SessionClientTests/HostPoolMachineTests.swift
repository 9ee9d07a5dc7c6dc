import Testing
@testable import SessionClient

/// `HostPoolMachine` driven without sockets, with stand-ins for connections and tasks: each scenario
/// lists events with the actions the machine answers, written out, and the counts at the end.
@Suite struct HostPoolMachineTests {
    final class Conn: Sendable { let name: String; init(_ name: String) { self.name = name } }
    final class Waiter: Sendable { let name: String; init(_ name: String) { self.name = name } }
    typealias Machine = HostPoolMachine<Conn, Waiter>

    static let c1 = Conn("c1"), c2 = Conn("c2"), c3 = Conn("c3")
    static let w1 = Waiter("w1"), w2 = Waiter("w2"), w3 = Waiter("w3")

    enum Event: Sendable {
        case enqueue(Waiter), remove(Waiter)
        /// `nextAction` until it answers nil.
        case dispatch, dispatchOffline
        case opened(Conn), openFailed
        case released(Conn, clean: Bool, rests: Bool)
        case detached, settled
        case idleEnded(Conn)
        case inspected(Conn, stray: Bool)
    }

    struct Scenario: Sendable, CustomTestStringConvertible {
        var name: String
        var limits = Machine.Limits(maxConnections: 4, maxIdle: 4)
        var steps: [(Event, String)]
        /// idle, busy, opening, waiting
        var counts: (Int, Int, Int, Int)
        var testDescription: String { name }
    }

    static func describe(_ action: Machine.Action?) -> String {
        guard let action else { return "nothing" }
        switch action {
        case .open(let w): return "open for \(w?.name ?? "nobody")"
        case .inspect(let c): return "inspect \(c.name)"
        case .hand(let c, let w, let reused): return "hand \(c.name) to \(w.name)\(reused ? " reused" : "")"
        case .keepIdle(let c, let resting): return resting ? "rest \(c.name)" : "idle \(c.name)"
        case .close(let c): return "close \(c.name)"
        case .discard(let c): return "discard \(c.name)"
        case .fail(let w, .offline): return "fail \(w.name) offline"
        case .fail(let w, .connectFailed): return "fail \(w.name) connect"
        }
    }

    static func apply(_ event: Event, to m: inout Machine) -> String {
        switch event {
        case .enqueue(let w): m.enqueue(w); return ""
        case .remove(let w): m.remove(w); return ""
        case .dispatch, .dispatchOffline:
            var done: [String] = []
            // As `HostPool` does, but an inspection's answer is the scenario's next step.
            while let a = m.nextAction(offline: { if case .dispatchOffline = event { true } else { false } }()) {
                done.append(describe(a))
                if case .inspect = a { break }
            }
            return done.isEmpty ? "nothing" : done.joined(separator: "; ")
        case .opened(let c): return describe(m.opened(c))
        case .openFailed: return describe(m.openFailed())
        case .released(let c, let clean, let rests): return describe(m.released(c, reusable: clean, rests: rests))
        case .detached: m.detached(); return ""
        case .settled: m.settled(); return ""
        case .idleEnded(let c): return m.idleEnded(c) ? "was idle" : "was not idle"
        case .inspected(let c, let stray): return describe(m.inspected(c, strayBytes: stray))
        }
    }

    /// w1 gets a new c1, which comes back clean and goes idle.
    static let c1Idle: [(Event, String)] = [
        (.enqueue(w1), ""), (.dispatch, "open for w1"), (.opened(c1), "hand c1 to w1"),
        (.released(c1, clean: true, rests: false), "idle c1"), (.dispatch, "nothing"),
    ]

    static let scenarios: [Scenario] = [
        Scenario(name: "the first task opens a connection",
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.dispatch, "nothing"), (.opened(c1), "hand c1 to w1")],
                 counts: (0, 1, 0, 0)),
        Scenario(name: "a connection released clean serves the next task",
                 steps: c1Idle + [(.enqueue(w2), ""), (.dispatch, "hand c1 to w2 reused")],
                 counts: (0, 1, 0, 0)),
        Scenario(name: "the cap counts busy and opening connections; waiters are served in order",
                 limits: .init(maxConnections: 2, maxIdle: 4),
                 steps: [(.enqueue(w1), ""), (.enqueue(w2), ""), (.enqueue(w3), ""), (.dispatch, "open for w1; open for w2"),
                         (.opened(c1), "hand c1 to w1"), (.dispatch, "nothing"), (.opened(c2), "hand c2 to w2"),
                         (.dispatch, "nothing"), (.released(c2, clean: true, rests: false), "idle c2"),
                         (.dispatch, "hand c2 to w3 reused")],
                 counts: (0, 2, 0, 0)),
        Scenario(name: "the most recently idle connection is handed out first",
                 steps: [(.enqueue(w1), ""), (.enqueue(w2), ""), (.dispatch, "open for w1; open for w2"),
                         (.opened(c1), "hand c1 to w1"), (.opened(c2), "hand c2 to w2"),
                         (.released(c1, clean: true, rests: false), "idle c1"), (.released(c2, clean: true, rests: false), "idle c2"),
                         (.enqueue(w3), ""), (.dispatch, "hand c2 to w3 reused")],
                 counts: (1, 1, 0, 0)),
        Scenario(name: "a dirty release closes the connection and frees its slot",
                 limits: .init(maxConnections: 1, maxIdle: 4),
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.opened(c1), "hand c1 to w1"), (.enqueue(w2), ""),
                         (.dispatch, "nothing"), (.released(c1, clean: false, rests: false), "close c1"),
                         (.dispatch, "open for w2")],
                 counts: (0, 0, 1, 1)),
        Scenario(name: "a resting connection waits for the loop to turn, and is not replaced meanwhile",
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.opened(c1), "hand c1 to w1"),
                         (.released(c1, clean: true, rests: true), "rest c1"), (.enqueue(w2), ""), (.dispatch, "nothing"),
                         (.settled, ""), (.dispatch, "inspect c1"), (.inspected(c1, stray: false), "hand c1 to w2 reused")],
                 counts: (0, 1, 0, 0)),
        Scenario(name: "bytes on a rested connection: discarded, the task waits for a fresh one",
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.opened(c1), "hand c1 to w1"),
                         (.released(c1, clean: true, rests: true), "rest c1"), (.settled, ""), (.enqueue(w2), ""),
                         (.dispatch, "inspect c1"), (.inspected(c1, stray: true), "discard c1"), (.dispatch, "open for w2")],
                 counts: (0, 0, 1, 1)),
        Scenario(name: "a connection rested and reused is looked at only once",
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.opened(c1), "hand c1 to w1"),
                         (.released(c1, clean: true, rests: true), "rest c1"), (.settled, ""), (.enqueue(w2), ""),
                         (.dispatch, "inspect c1"), (.inspected(c1, stray: false), "hand c1 to w2 reused"),
                         (.released(c1, clean: true, rests: false), "idle c1"), (.enqueue(w3), ""),
                         (.dispatch, "hand c1 to w3 reused")],
                 counts: (0, 1, 0, 0)),
        Scenario(name: "nothing is handed out while a connection is being looked at",
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.opened(c1), "hand c1 to w1"),
                         (.released(c1, clean: true, rests: true), "rest c1"), (.settled, ""), (.enqueue(w2), ""),
                         (.dispatch, "inspect c1"), (.dispatch, "nothing"), (.inspected(c2, stray: false), "nothing"),
                         (.inspected(c1, stray: false), "hand c1 to w2 reused"), (.inspected(c1, stray: false), "nothing")],
                 counts: (0, 1, 0, 0)),
        Scenario(name: "resting connections count against the cap",
                 limits: .init(maxConnections: 2, maxIdle: 4),
                 steps: [(.enqueue(w1), ""), (.enqueue(w2), ""), (.dispatch, "open for w1; open for w2"),
                         (.opened(c1), "hand c1 to w1"), (.opened(c2), "hand c2 to w2"),
                         (.released(c1, clean: true, rests: true), "rest c1"), (.enqueue(w3), ""), (.dispatch, "nothing")],
                 counts: (1, 1, 0, 1)),
        Scenario(name: "past the idle cap a released connection is closed",
                 limits: .init(maxConnections: 4, maxIdle: 1),
                 steps: [(.enqueue(w1), ""), (.enqueue(w2), ""), (.dispatch, "open for w1; open for w2"),
                         (.opened(c1), "hand c1 to w1"), (.opened(c2), "hand c2 to w2"),
                         (.released(c1, clean: true, rests: false), "idle c1"), (.released(c2, clean: true, rests: true), "close c2")],
                 counts: (1, 0, 0, 0)),
        Scenario(name: "an idle cap of zero keeps nothing",
                 limits: .init(maxConnections: 4, maxIdle: 0),
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.opened(c1), "hand c1 to w1"),
                         (.released(c1, clean: true, rests: false), "close c1")],
                 counts: (0, 0, 0, 0)),
        Scenario(name: "a connection opened for a task that left goes idle",
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.remove(w1), ""), (.opened(c1), "idle c1")],
                 counts: (1, 0, 0, 0)),
        Scenario(name: "a failed open fails the head of the queue; the others wait on",
                 limits: .init(maxConnections: 1, maxIdle: 4),
                 steps: [(.enqueue(w1), ""), (.enqueue(w2), ""), (.dispatch, "open for w1"), (.openFailed, "fail w1 connect"),
                         (.dispatch, "open for w2")],
                 counts: (0, 0, 1, 1)),
        Scenario(name: "a failed open with nobody waiting fails nobody",
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.remove(w1), ""), (.openFailed, "nothing")],
                 counts: (0, 0, 0, 0)),
        Scenario(name: "offline: every waiter fails, the idle connection stays",
                 steps: c1Idle + [(.enqueue(w2), ""), (.enqueue(w3), ""), (.dispatchOffline, "fail w2 offline; fail w3 offline")],
                 counts: (1, 0, 0, 0)),
        Scenario(name: "a cancelled waiter leaves the queue",
                 limits: .init(maxConnections: 1, maxIdle: 4),
                 steps: [(.enqueue(w1), ""), (.enqueue(w2), ""), (.enqueue(w3), ""), (.remove(w2), ""),
                         (.dispatch, "open for w1"), (.opened(c1), "hand c1 to w1"),
                         (.released(c1, clean: true, rests: false), "idle c1"), (.dispatch, "hand c1 to w3 reused")],
                 counts: (0, 1, 0, 0)),
        Scenario(name: "each connection opened is for the first task without one",
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.enqueue(w2), ""), (.dispatch, "open for w2"),
                         (.opened(c1), "hand c1 to w1"), (.enqueue(w3), ""), (.dispatch, "open for w3")],
                 counts: (0, 1, 2, 2)),
        Scenario(name: "no more opened than tasks wait",
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.dispatch, "nothing")],
                 counts: (0, 0, 1, 1)),
        Scenario(name: "an upgraded connection leaves and frees its slot",
                 limits: .init(maxConnections: 1, maxIdle: 4),
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.opened(c1), "hand c1 to w1"), (.enqueue(w2), ""),
                         (.dispatch, "nothing"), (.detached, ""), (.dispatch, "open for w2")],
                 counts: (0, 0, 1, 1)),
        Scenario(name: "an idle connection that ends leaves the pool once",
                 steps: c1Idle + [(.idleEnded(c1), "was idle"), (.idleEnded(c1), "was not idle"), (.idleEnded(c2), "was not idle")],
                 counts: (0, 0, 0, 0)),
        Scenario(name: "a resting connection that ends leaves the pool",
                 steps: [(.enqueue(w1), ""), (.dispatch, "open for w1"), (.opened(c1), "hand c1 to w1"),
                         (.released(c1, clean: true, rests: true), "rest c1"), (.idleEnded(c1), "was idle"), (.settled, ""),
                         (.enqueue(w2), ""), (.dispatch, "open for w2")],
                 counts: (0, 0, 1, 1)),
    ]

    @Test(arguments: scenarios) func pool(_ scenario: Scenario) {
        var machine = Machine(limits: scenario.limits)
        for (i, (event, expected)) in scenario.steps.enumerated() {
            let answer = Self.apply(event, to: &machine)
            #expect(answer == expected, "step \(i): \(event) answered \"\(answer)\", expected \"\(expected)\"")
        }
        let counts = (machine.idleCount, machine.busy, machine.opening, machine.waitingCount)
        #expect(counts == scenario.counts, "idle, busy, opening, waiting")
        #expect(machine.openCount == counts.0 + counts.1 + counts.2)
    }

    @Test func sheddingTakesEveryIdleConnectionOldestFirst() {
        var m = Machine(limits: .init(maxConnections: 4, maxIdle: 4))
        for w in [Self.w1, Self.w2] { m.enqueue(w) }
        while m.nextAction(offline: false) != nil {}
        _ = m.opened(Self.c1)
        _ = m.opened(Self.c2)
        _ = m.released(Self.c2, reusable: true, rests: false)
        _ = m.released(Self.c1, reusable: true, rests: true)
        #expect(m.oldestIdle === Self.c2)
        #expect(m.removeAllIdle().map(\.name) == ["c2", "c1"])
        #expect(m.idleCount == 0 && m.oldestIdle == nil)
    }

    @Test func tasksServedAreNotKeptByTheQueue() {
        var m = Machine(limits: .init(maxConnections: 1, maxIdle: 1))
        weak var first: Waiter?
        do {
            let waiters = (0..<100).map { Waiter("w\($0)") }
            first = waiters[0]
            for w in waiters { m.enqueue(w) }
        }
        guard case .open? = m.nextAction(offline: false) else { Issue.record("no open"); return }
        let conn = Conn("c")
        var served: [String] = []
        var action = m.opened(conn)
        while case .hand(let c, let w, _) = action {
            served.append(w.name)
            _ = m.released(c, reusable: true, rests: false)
            guard let next = m.nextAction(offline: false) else { break }
            action = next
        }
        #expect(served == (0..<100).map { "w\($0)" })
        #expect(first == nil)
        #expect(m.waitingCount == 0)
    }
}
