package atomicfile

import "time"

// SettleTime is how old a change must be for a Cache to trust lstat.
const SettleTime = settleTime

// CacheReads returns how many times c has read a file from disk.
func CacheReads[T any](c *Cache[T]) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// SetCacheClock makes c take the time of a read from now.
func SetCacheClock[T any](c *Cache[T], now func() time.Time) { c.now = now }

// CacheLen returns how many files c keeps.
func CacheLen[T any](c *Cache[T]) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
