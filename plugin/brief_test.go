package plugin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// TestBriefStatus: GET /v1/status?brief=1 answers what the runtime needs
// of each network (HCA port, CDI device, subnets, QoS, the GID timeout)
// and nothing read from the kernel: no GID table, no devices, no endpoint.
func TestBriefStatus(t *testing.T) {
	e := newMetricsEnv(t, rdmatest.MLX5Options{TableSize: 10}, 300*time.Millisecond)
	e.mustCall("CreateNetwork", createNetworkReq(metricsNet, map[string]string{"parent": "p0", "traffic_class": "106"}))
	e.mustCall("CreateEndpoint", endpointReq(metricsEP1, "10.5.0.2/24"))
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, plugin.StatusPath+"?"+api.BriefQuery, nil))
	var st api.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("brief status: HTTP %d %q: %v", rec.Code, rec.Body, err)
	}
	tc := 106
	want := api.Network{ID: metricsNet, Parent: "p0", Mode: "bridge", HCA: "mlx5_0", Port: 1, CDIDevice: "rdma-macvlan/hca=mlx5_0",
		Subnets: []string{"10.5.0.0/24"}, TrafficClass: &tc, Endpoints: []api.Endpoint{}}
	if st.GIDTimeout != "300ms" || len(st.Networks) != 1 {
		t.Fatalf("brief status %+v", st)
	}
	got := st.Networks[0]
	got.MTU = 0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("brief network\n%+v, want\n%+v", got, want)
	}
	if full := e.status(); full.Networks[0].GIDTable == nil || len(full.Networks[0].Endpoints) != 1 {
		t.Errorf("the full status lost its table or endpoint: %+v", full.Networks[0])
	}
}
