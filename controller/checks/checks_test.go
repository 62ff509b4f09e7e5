package checks

import (
	"context"
	"fmt"
	"io"
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
		{name: "an error page", status: http.StatusInternalServerError, answer: `<html><body>oops</body></html>`, wantErr: "500 Internal Server Error"},
		{name: "HTML, said to be fine", status: http.StatusOK, answer: `<html><body>hello</body></html>`, wantErr: "not an answer of Prometheus's query API"},
		{name: "success in a failed status", status: http.StatusServiceUnavailable, answer: `{"status":"success","data":{"resultType":"scalar","result":[1,"0"]}}`, wantErr: "503"},
		{name: "-Inf", answer: `{"resultType":"scalar","result":[1,"-Inf"]}`, wantErr: "value is -Inf; a check needs a finite number"},
		{name: "+Inf", answer: `{"resultType":"vector","result":[{"metric":{},"value":[1,"+Inf"]}]}`, wantErr: "value is +Inf"},
		{name: "NaN (0/0, a quiet service's ratio): no value", answer: `{"resultType":"scalar","result":[1,"NaN"]}`, want: math.NaN()},
		{name: "a value that is not a number", answer: `{"resultType":"scalar","result":[1,"x"]}`, wantErr: "scalar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/v1/query" {
					http.NotFound(w, r)
					return
				}
				// A GET with the query in the URL, as docs/progressive-delivery.md promises (never a form posted).
				if r.Method != http.MethodGet || r.URL.Query().Get("query") != "sum(rate(x[1m]))" || r.URL.Query().Get("time") == "" {
					t.Errorf("%s %s, want a GET with the query and a time in the URL", r.Method, r.URL)
					w.WriteHeader(http.StatusMethodNotAllowed)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if tt.status != 0 {
					if strings.HasPrefix(tt.answer, "<") {
						w.Header().Set("Content-Type", "text/html")
					}
					w.WriteHeader(tt.status)
					_, _ = fmt.Fprint(w, tt.answer)
					return
				}
				_, _ = fmt.Fprintf(w, `{"status":"success","data":%s}`, tt.answer)
			}))
			defer srv.Close()
			got := Query(context.Background(), nil, srv.URL, "sum(rate(x[1m]))", time.Now())
			switch {
			case tt.wantErr != "":
				if got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr) {
					t.Errorf("err %v, want one saying %q", got.Err, tt.wantErr)
				}
			case got.Err != nil:
				t.Errorf("err %v", got.Err)
			case math.IsNaN(tt.want) != math.IsNaN(got.Value) || (!math.IsNaN(tt.want) && got.Value != tt.want):
				t.Errorf("value %v, want %v", got.Value, tt.want)
			}
		})
	}
	t.Run("no Prometheus there", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		addr := srv.URL
		srv.Close()
		if got := Query(context.Background(), nil, addr, "up", time.Now()); got.Err == nil {
			t.Errorf("no error from a closed address: %+v", got)
		}
	})
}

// TestQueryCheckUnderAPrefix: an address with a path (a Prometheus served under a prefix) keeps it.
func TestQueryCheckUnderAPrefix(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/prom/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		_, _ = fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}`)
	}))
	defer srv.Close()
	if got := Query(context.Background(), nil, srv.URL+"/prom/", "up", time.Now()); got.Err != nil || got.Value != 2 {
		t.Errorf("value %v, error %v; want the value 2 from /prom/api/v1/query", got.Value, got.Err)
	}
	if got := Query(context.Background(), nil, "ftp://x", "up", time.Now()); got.Err == nil {
		t.Errorf("no error for an address that is not http(s)")
	}
}

// TestQueryCheckBoundsTheAnswer: an answer larger than maxCheckAnswer is a failed measurement, and is not read
// whole: the server of a 64 MiB answer, streamed or declared, gets to write only a part of it.
func TestQueryCheckBoundsTheAnswer(t *testing.T) {
	const size = 64 << 20
	for _, declared := range []bool{false, true} {
		t.Run(fmt.Sprintf("length declared %v", declared), func(t *testing.T) {
			written := make(chan int64, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if declared {
					w.Header().Set("Content-Length", fmt.Sprint(size))
				}
				// Valid JSON throughout: read whole, it would decode to a passing value.
				head := `{"status":"success","data":{"resultType":"scalar","result":[1,"0"]},"pad":"`
				n, _ := io.WriteString(w, head)
				total := int64(n)
				chunk := strings.Repeat("x", 64<<10)
				for pad := int64(size - len(head) - 2); pad > 0; {
					n, err := io.WriteString(w, chunk[:min(pad, int64(len(chunk)))])
					total, pad = total+int64(n), pad-int64(n)
					if err != nil {
						break
					}
				}
				n, _ = io.WriteString(w, `"}`)
				total += int64(n)
				written <- total
			}))
			defer srv.Close()
			got := Query(context.Background(), nil, srv.URL, "up", time.Now())
			if got.Err == nil || !strings.Contains(got.Err.Error(), "larger than 4 MiB") {
				t.Errorf("value %v, error %v; want an error saying the answer is larger than 4 MiB", got.Value, got.Err)
			}
			// The client hung up: the server's writes fail once the socket buffers are full.
			select {
			case n := <-written:
				if n >= size/2 {
					t.Errorf("the server wrote %d of %d bytes: the answer was read on", n, size)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("the server still writes 10 s after the check ended")
			}
		})
	}
}
