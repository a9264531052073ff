package plugin

import "time"

// SetLimits shortens a server's connection limits for tests; call it before
// Serve.
func (s *Server) SetLimits(maxConns int, header, body, write, idle time.Duration) {
	s.maxConns, s.headerTimeout, s.bodyTimeout, s.writeTimeout, s.idleTimeout = maxConns, header, body, write, idle
}

// OpenConns reports how many connections the server holds open.
func (s *Server) OpenConns() int {
	if l := s.conns.Load(); l != nil {
		return l.Open()
	}
	return 0
}

// MaxConns is the server's cap on open connections.
func (s *Server) MaxConns() int { return s.maxConns }
