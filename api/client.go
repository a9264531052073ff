package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Client reads the status of a daemon over its unix socket.
type Client struct {
	// Socket is the daemon's unix socket.
	Socket string
	// HTTP carries the requests; its transport dials Socket whatever the
	// URL's host.
	HTTP *http.Client
}

// NewClient returns a Client for the daemon listening on socket.
func NewClient(socket string) *Client {
	return &Client{
		Socket: socket,
		HTTP: &http.Client{
			Timeout: 30 * time.Second,
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", socket)
				},
			},
		},
	}
}

// Status fetches GET /v1/status. Errors of the connection are wrapped, so
// errors.Is finds fs.ErrNotExist (no socket) and fs.ErrPermission (a
// socket the caller may not use).
func (c *Client) Status() (Status, error) {
	return c.get(StatusPath)
}

// Brief fetches the brief status (BriefQuery), with its errors as Status.
func (c *Client) Brief() (Status, error) {
	return c.get(StatusPath + "?" + BriefQuery)
}

func (c *Client) get(path string) (Status, error) {
	var st Status
	r, err := c.HTTP.Get("http://plugin" + path)
	if err != nil {
		return st, fmt.Errorf("get status from %s: %w", c.Socket, err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		return st, fmt.Errorf("get status: HTTP %d: %s", r.StatusCode, bytes.TrimSpace(b))
	}
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("decode status: %w", err)
	}
	return st, nil
}
