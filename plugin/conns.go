package plugin

import "github.com/rdma-macvlan/rdma-macvlan/internal/connlimit"

// DefaultMaxConns caps the plugin socket's open connections. Docker's
// plugin client opens one connection per call in flight and keeps two idle
// ones; a container start or stop makes its calls one after the other, so
// an engine holds about as many connections as it starts and stops
// containers at once (50 in make e2e-reliability). The cap is 20 times
// that; at about 20 KiB of buffers and stack per connection it also bounds
// their memory to ~20 MiB. A lower limit on file descriptors lowers it
// (see connlimit.Caps); so does a metrics address, which has a cap of its
// own within the same limit (SetMaxConns).
const DefaultMaxConns = 1024

// Time limits of a connection to the plugin socket (see connlimit); tests
// shorten them.
const (
	headerTimeout = connlimit.HeaderTimeout
	bodyTimeout   = connlimit.BodyTimeout
	writeTimeout  = connlimit.WriteTimeout
	idleTimeout   = connlimit.IdleTimeout
)

// processConnLimit is the plugin socket's cap for this process when it
// has no other listener.
func processConnLimit() int {
	return connlimit.Caps(connlimit.ProcessFDs(), DefaultMaxConns)[0]
}
