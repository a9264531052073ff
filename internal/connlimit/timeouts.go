package connlimit

import "time"

// Time limits of a connection. Docker and scrapers send a request in one
// write and read the answer at once; a client slower than these is broken
// or hostile, and must not hold a connection (a file descriptor) longer.
const (
	HeaderTimeout = 10 * time.Second // request line and headers
	BodyTimeout   = 15 * time.Second // the whole request, headers included
	WriteTimeout  = 10 * time.Second // writing one answer
	IdleTimeout   = 30 * time.Second // a kept-alive connection between requests
)

// MaxHeaderBytes bounds a request's headers: nothing that speaks to the
// daemon sends more than a few hundred bytes of them.
const MaxHeaderBytes = 64 << 10
