package netproxy

// MemoryBoundFor is MemoryBound for a proxy of maxConns connections, for
// callers that size the supervisor before a proxy exists (tests, docs).
func MemoryBoundFor(maxConns int) int64 {
	return (&Proxy{cfg: Config{MaxConns: maxConns}}).MemoryBound()
}
