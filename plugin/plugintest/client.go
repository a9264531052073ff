// Package plugintest is a client of the daemon's socket for tests,
// benchmarks and the kernel tests: the protocol calls as Docker makes them.
package plugintest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

// Client talks to a running daemon over its unix socket the way Docker does:
// the protocol calls, and (from api.Client) GET /v1/status. Programs that
// only read the status use api.Client.
type Client struct {
	*api.Client
}

// CallError is an error the daemon answered with ({"Err": "..."}).
type CallError struct {
	Op  string
	Msg string
}

func (e *CallError) Error() string { return e.Msg }

// NewClient returns a Client for the daemon listening on socket.
func NewClient(socket string) *Client {
	return &Client{Client: api.NewClient(socket)}
}

// Call posts req as JSON to /NetworkDriver.<op> and decodes the answer into
// resp (which may be nil).
func (c *Client) Call(op string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s request: %w", op, err)
	}
	return c.CallRaw(op, body, resp)
}

// CallRaw posts body as it is; tests use it for malformed requests.
func (c *Client) CallRaw(op string, body []byte, resp any) error {
	r, err := c.HTTP.Post("http://plugin/NetworkDriver."+op, "application/vnd.docker.plugins.v1.2+json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("call %s on %s: %w", op, c.Socket, err)
	}
	defer r.Body.Close()
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("read %s answer: %w", op, err)
	}
	var e struct{ Err string }
	if json.Unmarshal(data, &e) == nil && e.Err != "" {
		return &CallError{Op: op, Msg: e.Err}
	}
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("call %s: HTTP %d: %s", op, r.StatusCode, bytes.TrimSpace(data))
	}
	if resp != nil {
		if err := json.Unmarshal(data, resp); err != nil {
			return fmt.Errorf("decode %s answer: %w", op, err)
		}
	}
	return nil
}
