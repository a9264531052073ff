package plugin_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
)

// TestContentType: a protocol call's body is JSON. What Docker's plugin
// client sends (moby's pkg/plugins: no Content-Type at all, only Accept:
// application/vnd.docker.plugins.v1.2+json) and the JSON types are
// accepted on every call; a form or text body is refused on every call,
// with the type named and the way to send it, before the call runs.
func TestContentType(t *testing.T) {
	srv := handlerServer(t)
	create := []byte(`{"NetworkID":"n1","Options":{"com.docker.network.generic":{"parent":"p0"}},` +
		`"IPv4Data":[{"AddressSpace":"LocalDefault","Pool":"10.5.0.0/24","Gateway":"10.5.0.1/24"}]}`)
	post := func(path, ctype string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Accept", "application/vnd.docker.plugins.v1.2+json")
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "application/vnd.docker.plugins.v1.2+json", "application/vnd.docker.plugins.v1.1+json"} {
		t.Run("accepted "+ct, func(t *testing.T) {
			for _, path := range []string{"/Plugin.Activate", "/NetworkDriver.GetCapabilities"} {
				if rec := post(path, ct, nil); rec.Code != http.StatusOK {
					t.Errorf("%s with Content-Type %q: HTTP %d %s", path, ct, rec.Code, rec.Body)
				}
			}
			if rec := post("/NetworkDriver.CreateNetwork", ct, create); rec.Code != http.StatusOK {
				t.Errorf("CreateNetwork with Content-Type %q: HTTP %d %s", ct, rec.Code, rec.Body)
			}
			if rec := post("/NetworkDriver.DeleteNetwork", ct, []byte(`{"NetworkID":"n1"}`)); rec.Code != http.StatusOK {
				t.Errorf("DeleteNetwork with Content-Type %q: HTTP %d %s", ct, rec.Code, rec.Body)
			}
		})
	}
	for _, ct := range []string{"application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain", "application/xml", "json", "application/json;;"} {
		t.Run("refused "+ct, func(t *testing.T) {
			for _, rt := range routes {
				if rt[0] != http.MethodPost {
					continue
				}
				op := strings.TrimPrefix(strings.TrimPrefix(rt[1], "/NetworkDriver."), "/")
				rec := post(rt[1], ct, create)
				var e struct{ Err string }
				_ = json.Unmarshal(rec.Body.Bytes(), &e)
				if rec.Code != http.StatusUnsupportedMediaType {
					t.Errorf("%s with Content-Type %q: HTTP %d %s, want 415", rt[1], ct, rec.Code, rec.Body)
					continue
				}
				for _, w := range []string{op + " request has Content-Type", ct, "application/json"} {
					if !strings.Contains(e.Err, w) {
						t.Errorf("%s: error %q does not say %q", rt[1], e.Err, w)
					}
				}
			}
			// Nothing was created by a refused CreateNetwork.
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, plugin.StatusPath, nil))
			var st api.Status
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatalf("status %s: %v", rec.Body, err)
			}
			if len(st.Networks) != 0 {
				t.Errorf("networks exist after refused calls: %+v", st.Networks)
			}
		})
	}
}
