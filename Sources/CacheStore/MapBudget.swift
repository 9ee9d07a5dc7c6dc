/// How full LMDB's map may get, judged by the pages LMDB really uses rather than by stored bytes.
///
/// Small entries cost the map far more than their bytes: a body of just over half a page takes a
/// whole overflow page, each entry adds rows to three B-trees, and every transaction copies the
/// path it changes. So stored bytes under-count the map in use, and a map let fill up cannot even
/// delete (a deletion copies pages too, and its freed pages go on the free list, which takes
/// pages): that is a wedge. The writer evicts early enough that the next batch and the deletions
/// it may need still fit. Pure: the writer passes in what `mdb_env_info`/`mdb_env_stat` and the
/// free list say.
struct MapBudget: Equatable {
    /// The map's size at run time.
    var mapBytes: Int
    /// The most stored bytes one batch of the writer carries.
    var batchBytes: Int
    var pageSize: Int

    /// What a batch of `bytes` stored bytes may take in the map: up to twice its bytes (a body of
    /// half a page and a little takes a page; a head and its key rows a fraction of another), and
    /// the pages its commit copies along the trees' paths and for the free list.
    func batchCost(_ bytes: Int) -> Int { 2 * bytes + 64 * pageSize }

    /// Kept free below the next batch for deletions: eviction and purges run in small transactions
    /// that need free pages themselves (copy-on-write of the paths, the free list's own records,
    /// which grow with the pages a purge frees: about 1/512 of the map for a purge of everything),
    /// and the pages freed by the last commit are only reusable two commits later. A few per cent
    /// of the map, or 1 MiB, whichever is larger: 1/32 covers a whole-map purge's free-list record
    /// sixteen times over, and 1 MiB gives a small map's deletions a few hundred pages.
    var reserve: Int { max(mapBytes / 32, 1 << 20) }

    /// Pages in use (bytes) beyond which the writer evicts: room must stay for the largest batch
    /// and the reserve (in a map of a few MiB that would leave next to nothing: a quarter of it
    /// at least, where batches are smaller than the largest anyway).
    var evictAbove: Int { max(mapBytes - reserve - batchCost(batchBytes), mapBytes / 4) }

    /// Pages in use (bytes) eviction brings the map down to: below `evictAbove` by half a batch or
    /// 2 % of the map, so that not every batch starts an eviction of its own; in a map of a few
    /// MiB, where that is most of it, a quarter below.
    var evictTo: Int { max(evictAbove - max(batchCost(batchBytes) / 2, mapBytes / 50), evictAbove * 3 / 4) }

    /// Stored bytes to evict down to, if any: when the pages in use pass `evictAbove`, enough
    /// stored bytes that, at the ratio of pages in use to stored bytes seen now, the map comes down
    /// to `evictTo`; past `capacity`, 90 % of it. `room`: map bytes wanted beyond that (a batch
    /// that met a full map, to be tried again).
    static func target(inUse: Int, stored: Int, capacity: Int, budget: MapBudget, room: Int = 0) -> Int? {
        var target: Int? = stored > capacity ? capacity - capacity / 10 : nil
        if inUse + room > budget.evictAbove, stored > 0 {
            // Each stored byte holds this many bytes of the map (at least one).
            let perStoredByte = max(Double(inUse) / Double(stored), 1)
            let excess = Double(inUse + room - budget.evictTo) / perStoredByte
            let byPages = max(stored - Int(excess.rounded(.up)), 0)
            target = min(target ?? byPages, byPages)
        }
        return target
    }
}
