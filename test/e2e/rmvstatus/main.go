// Command rmvstatus prints what a running rdma-macvlan daemon answers on
// GET /v1/status as plain lines, for test/e2e/e2e.sh to grep. It decodes the
// answer with its own types named after the status fields the README
// documents, not with the daemon's, so a renamed field shows up as a failed check.
//
//	rmvstatus -socket /run/docker/plugins/<plugin id>/rdma-macvlan.sock
//
// prints one line per network and one per endpoint:
//
//	network <id> parent=<p> hca=<h> port=<n> netns_mode=<m> gid_size=<n> gid_used=<n> gid_free=<n> endpoints=<n>
//	endpoint <network id> <endpoint id> ifname=<name> ipv4=<ip> ipv6=<ip> mac=<mac> rdma_ready=<bool> gids=<i,j> reason=<quoted> conflicts=<address@mac,...>
//
// It exits 1 when the daemon cannot be reached or answers something that
// is not a status.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

type status struct {
	Networks *[]network `json:"networks"`
}

type network struct {
	ID        string     `json:"id"`
	Parent    string     `json:"parent"`
	HCA       string     `json:"hca"`
	Port      int        `json:"port"`
	NetnsMode string     `json:"netns_mode"`
	GIDTable  *gidTable  `json:"gid_table"`
	Endpoints []endpoint `json:"endpoints"`
	GIDCheck  string     `json:"gid_check"`
	CheckNote string     `json:"gid_check_note"`
}

type gidTable struct {
	Size int `json:"size"`
	Used int `json:"used"`
	Free int `json:"free"`
}

type endpoint struct {
	ID        string `json:"id"`
	Ifname    string `json:"ifname"`
	IPv4      string `json:"ipv4"`
	IPv6      string `json:"ipv6"`
	MAC       string `json:"mac"`
	GIDs      []gid  `json:"gids"`
	RDMAReady *bool  `json:"rdma_ready"`
	Reason    string `json:"rdma_reason"`
	Conflicts []struct {
		Address string `json:"address"`
		MAC     string `json:"mac"`
	} `json:"address_conflicts"`
}

type gid struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
	GID   string `json:"gid"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rmvstatus:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("rmvstatus", flag.ContinueOnError)
	socket := fs.String("socket", "", "the daemon's unix socket (required)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *socket == "" || fs.NArg() > 0 {
		return errors.New("usage: rmvstatus -socket PATH [-timeout D]")
	}
	st, err := fetch(*socket, *timeout)
	if err != nil {
		return err
	}
	return write(out, st)
}

func fetch(socket string, timeout time.Duration) (status, error) {
	var st status
	c := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
		},
	}
	r, err := c.Get("http://rdma-macvlan/v1/status")
	if err != nil {
		return st, fmt.Errorf("get /v1/status on %s: %w", socket, err)
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return st, fmt.Errorf("read /v1/status: %w", err)
	}
	if r.StatusCode != http.StatusOK {
		return st, fmt.Errorf("get /v1/status: HTTP %d: %s", r.StatusCode, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("decode /v1/status: %w", err)
	}
	if st.Networks == nil {
		return st, fmt.Errorf("/v1/status has no \"networks\" list: %s", strings.TrimSpace(string(body)))
	}
	return st, nil
}

func write(out io.Writer, st status) error {
	var b strings.Builder
	for _, n := range *st.Networks {
		size, used, free := -1, -1, -1
		if n.GIDTable != nil {
			size, used, free = n.GIDTable.Size, n.GIDTable.Used, n.GIDTable.Free
		}
		fmt.Fprintf(&b, "network %s parent=%s hca=%s port=%d netns_mode=%s gid_size=%d gid_used=%d gid_free=%d endpoints=%d gid_check=%s gid_check_note=%q\n",
			n.ID, dash(n.Parent), dash(n.HCA), n.Port, dash(n.NetnsMode), size, used, free, len(n.Endpoints), dash(n.GIDCheck), n.CheckNote)
		for _, e := range n.Endpoints {
			idx := make([]string, 0, len(e.GIDs))
			for _, g := range e.GIDs {
				idx = append(idx, strconv.Itoa(g.Index))
			}
			ready := "missing"
			if e.RDMAReady != nil {
				ready = strconv.FormatBool(*e.RDMAReady)
			}
			dups := make([]string, 0, len(e.Conflicts))
			for _, c := range e.Conflicts {
				dups = append(dups, c.Address+"@"+c.MAC)
			}
			fmt.Fprintf(&b, "endpoint %s %s ifname=%s ipv4=%s ipv6=%s mac=%s rdma_ready=%s gids=%s reason=%q conflicts=%s\n",
				n.ID, e.ID, dash(e.Ifname), dash(e.IPv4), dash(e.IPv6), dash(e.MAC), ready, dash(strings.Join(idx, ",")), e.Reason, dash(strings.Join(dups, ",")))
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// dash keeps the fields of a line in place when a value is empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
