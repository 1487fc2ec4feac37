import NIOPosix

extension NIOThreadPool {
    /// Where catalogue loads, polls and the doctor's check run. A load hashes every changed
    /// content file, seconds of work for a large one; on the shared pool that serves content
    /// reads (`NIOThreadPool.singleton`, one thread per core) it would stall every download in
    /// flight for as long. Two threads: a reload and a check never wait behind each other.
    static let catalog: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        return pool
    }()
}
