package controller

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestQueryCheck reads Prometheus's query API answers (the format only: the real Prometheus answers them in the real
// node's canary test).
func TestQueryCheck(t *testing.T) {
	tests := []struct {
		name, answer string
		status       int
		want         float64 // NaN: no value
		wantErr      string
	}{
		{name: "scalar", answer: `{"resultType":"scalar","result":[1700000000,"0.25"]}`, want: 0.25},
		{name: "one series", answer: `{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"0.01"]}]}`, want: 0.01},
		{name: "no series: no value", answer: `{"resultType":"vector","result":[]}`, want: math.NaN()},
		{name: "two series", answer: `{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"]},{"metric":{"a":"2"},"value":[1,"2"]}]}`, wantErr: "returns 2 series"},
		{name: "a range", answer: `{"resultType":"matrix","result":[]}`, wantErr: "needs a scalar or an instant vector"},
		{name: "a bad query", status: http.StatusBadRequest, answer: `{"status":"error","errorType":"bad_data","error":"parse error"}`, wantErr: "parse error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/v1/query" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if tt.status != 0 {
					w.WriteHeader(tt.status)
					_, _ = fmt.Fprint(w, tt.answer)
					return
				}
				_, _ = fmt.Fprintf(w, `{"status":"success","data":%s}`, tt.answer)
			}))
			defer srv.Close()
			got := queryCheck(context.Background(), nil, srv.URL, "sum(rate(x[1m]))", time.Now())
			switch {
			case tt.wantErr != "":
				if got.err == nil || !strings.Contains(got.err.Error(), tt.wantErr) {
					t.Errorf("err %v, want one saying %q", got.err, tt.wantErr)
				}
			case got.err != nil:
				t.Errorf("err %v", got.err)
			case math.IsNaN(tt.want) != math.IsNaN(got.value) || (!math.IsNaN(tt.want) && got.value != tt.want):
				t.Errorf("value %v, want %v", got.value, tt.want)
			}
		})
	}
	t.Run("no Prometheus there", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		addr := srv.URL
		srv.Close()
		if got := queryCheck(context.Background(), nil, addr, "up", time.Now()); got.err == nil {
			t.Errorf("no error from a closed address: %+v", got)
		}
	})
}
