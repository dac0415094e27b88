package attach

// Stopped reports whether every session has been told to stop reading.
func (l *Listener) Stopped() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closing {
		return false
	}
	for s := range l.sessions {
		s.mu.Lock()
		h := s.handover
		s.mu.Unlock()
		if !h {
			return false
		}
	}
	return true
}

// Crash closes every connection without a goodbye, as the writer's death
// would.
func (l *Listener) Crash() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closing = true
	for c := range l.conns {
		c.Close()
	}
}
