package plugin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// decodedCalls are the protocol calls whose handlers decode their body.
var decodedCalls = []string{
	"CreateNetwork", "DeleteNetwork", "CreateEndpoint", "DeleteEndpoint", "EndpointOperInfo", "Join", "Leave",
	"ProgramExternalConnectivity", "RevokeExternalConnectivity", "DiscoverNew", "DiscoverDelete",
	"AllocateNetwork", "FreeNetwork", "GwAllocCheck",
}

// tooDeep is the refusal of a body nested deeper than the plugin allows.
const tooDeep = "JSON nested more than 32 levels deep"

// handlerServer is the daemon's handler on a driver with fake links (p0, p1)
// and a fake mlx5 sysfs, without a socket.
func handlerServer(tb testing.TB) *plugin.Server {
	tb.Helper()
	sysfs := tb.TempDir()
	if err := rdmatest.BuildMLX5(sysfs, rdmatest.MLX5Options{Netdev: "p0"}); err != nil {
		tb.Fatal(err)
	}
	d, err := driver.New(driver.Config{StateDir: tb.TempDir(), Links: newFuzzLinks(), Log: quietLogger(), Sysfs: rdma.NewSysfs(sysfs),
		CDIDir: tb.TempDir(), GIDTimeout: time.Second, GIDPoll: 5 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.Close)
	srv := plugin.NewServer(quietLogger())
	srv.SetDriver(d)
	return srv
}

// nested is depth arrays inside each other: [[[...]]].
func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// deepBodies are bodies of about size bytes nested as deep as that allows,
// in the places a decoder goes down: the top level, a field the strict
// decoder walks (a list of the request, or a member of an object it checks),
// and a field it skips (unknown to the request type).
func deepBodies(size int) map[string][]byte {
	const head = `{"NetworkID":"n1","IPv4Data":`
	depth := (size - len(head) - 1) / 2
	return map[string][]byte{
		"top level":     []byte(nested(size / 2)),
		"walked field":  []byte(head + nested(depth) + `}`),
		"unknown field": []byte(`{"NetworkID":"n1","Pad":` + nested(depth) + `}`),
		"object members": []byte(strings.Repeat(`{"a":`, (size-2)/6) + `1` +
			strings.Repeat("}", (size-2)/6)),
	}
}

// allocated returns the bytes the process allocated while fn ran.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDeepNestingRefused sends every call that decodes its body requests
// nested tens of thousands of levels deep, of 40 KB and of 1 MiB (just
// under the body limit). Each must be refused with the limit named, and
// must cost a bounded amount of memory: a small multiple of the body read,
// not a copy of the path per level (which made a 40 KB request cost
// hundreds of MB). The 1 MiB bodies only go to a call that passed at 40 KB:
// a decoder that costs the square of the depth would not survive them.
func TestDeepNestingRefused(t *testing.T) {
	srv := handlerServer(t)
	for _, op := range decodedCalls {
		t.Run(op, func(t *testing.T) {
			for _, size := range []int{40 << 10, 1<<20 - 64} {
				bodies := deepBodies(size)
				// Reading the body costs two to four times its size
				// (io.ReadAll's growth; the upper end under the race
				// detector); the answer, logging and the recorder a few
				// KB. The old decoder took 450 MB at 40 KB.
				limit := uint64(8*size + 256<<10)
				ok := true
				for _, where := range []string{"top level", "walked field", "unknown field", "object members"} {
					body := bodies[where]
					ok = t.Run(fmt.Sprintf("%d bytes, %s", size, where), func(t *testing.T) {
						var rec *httptest.ResponseRecorder
						n := allocated(func() { rec = serve(t, srv, op, body) })
						var e struct{ Err string }
						_ = json.Unmarshal(rec.Body.Bytes(), &e)
						if rec.Code == http.StatusOK || !strings.Contains(e.Err, tooDeep) {
							t.Errorf("HTTP %d %.200q: want the refusal %q", rec.Code, rec.Body.String(), tooDeep)
						}
						if n > limit {
							t.Errorf("a %d-byte request allocated %d bytes (%.1f MB), more than %d", len(body), n, float64(n)/1e6, limit)
						}
					}) && ok
				}
				if !ok {
					break
				}
			}
		})
	}
}

// TestNestingLimitIsExact: 32 levels are decoded as usual, 33 refused.
func TestNestingLimitIsExact(t *testing.T) {
	srv := handlerServer(t)
	for depth, refused := range map[int]bool{32: false, 33: true} {
		// The request object is the first level.
		body := `{"NetworkID":"n1","Pad":` + nested(depth-1) + `}`
		rec := serve(t, srv, "DeleteNetwork", []byte(body))
		if got := strings.Contains(rec.Body.String(), tooDeep); got != refused {
			t.Errorf("%d levels: answer %s, refused for depth: %v, want %v", depth, rec.Body, got, refused)
		}
	}
	// Brackets inside strings are text, not nesting.
	body := `{"NetworkID":"n1","Pad":"` + strings.Repeat(`[{\"`, 100) + `"}`
	if rec := serve(t, srv, "DeleteNetwork", []byte(body)); strings.Contains(rec.Body.String(), tooDeep) {
		t.Errorf("brackets in a string counted as nesting: %s", rec.Body)
	}
}

// BenchmarkDeepNesting measures what a deeply nested CreateNetwork costs
// the daemon's handler, of 40 KB and of 1 MiB (B/op is the memory it
// allocates).
func BenchmarkDeepNesting(b *testing.B) {
	srv := handlerServer(b)
	for _, size := range []struct {
		name string
		n    int
	}{{"40KB", 40 << 10}, {"1MiB", 1<<20 - 64}} {
		body := deepBodies(size.n)["walked field"]
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for i := 0; i < b.N; i++ {
				serve(b, srv, "CreateNetwork", body)
			}
		})
	}
}
