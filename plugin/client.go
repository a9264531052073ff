package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver"
)

// Client talks to a running daemon over its unix socket the way Docker does.
// Tests, benchmarks and the docker-rdma CLI use it.
type Client struct {
	Socket string
	http   *http.Client
}

// CallError is an error the daemon answered with ({"Err": "..."}).
type CallError struct {
	Op  string
	Msg string
}

func (e *CallError) Error() string { return e.Msg }

// NewClient returns a Client for the daemon listening on socket.
func NewClient(socket string) *Client {
	return &Client{
		Socket: socket,
		http: &http.Client{
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
	r, err := c.http.Post("http://plugin/NetworkDriver."+op, "application/vnd.docker.plugins.v1.2+json", bytes.NewReader(body))
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

// Status fetches GET /v1/status.
func (c *Client) Status() (driver.Status, error) {
	var st driver.Status
	r, err := c.http.Get("http://plugin" + StatusPath)
	if err != nil {
		return st, fmt.Errorf("get status from %s: %w", c.Socket, err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(r.Body)
		return st, fmt.Errorf("get status: HTTP %d: %s", r.StatusCode, bytes.TrimSpace(b))
	}
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("decode status: %w", err)
	}
	return st, nil
}
