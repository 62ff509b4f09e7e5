// Package checks evaluates a canary's checks: the one HTTP call the operator makes to an address a WebApp chooses
// (a Prometheus query, answered by one number, bounded in time and in size). The step machine (controller/canary)
// decides from the results; the reconciler (controller/canary_run.go) runs a round of them apart from the reconcile.
package checks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/example/webapp-operator/controller/canary"
)

// Timeout bounds one check's query: a Prometheus that does not answer fails the check, it does not hold the
// reconcile.
const Timeout = 5 * time.Second

// maxCheckAnswer bounds the answer of a check's query that is read: whoever may create a WebApp chooses the
// address, so an answer is never read whole (a 64 MiB answer once tripled the operator's memory). An instant
// query's answer for one number is a few hundred bytes; a larger one fails the check.
const maxCheckAnswer = 4 << 20

// errAnswerTooLarge is the failed measurement of an answer larger than maxCheckAnswer.
var errAnswerTooLarge = fmt.Errorf("the answer is larger than %d MiB; a check needs one number (aggregate it, e.g. with sum)", maxCheckAnswer>>20)

// Query evaluates a canary check's PromQL query on the Prometheus at address, at now: its value is a
// scalar's, or the one sample of an instant vector. An empty vector, or NaN, is no value (NaN in the result: what
// the check's onNoData says, never a silent pass); more than one series, an infinite value,
// or an answer larger than maxCheckAnswer is an error, since a check compares one number with its threshold.
//
// The query is sent as a GET of /api/v1/query with its parameters in the URL (Prometheus accepts GET and POST
// alike): a GET is a read by definition, so the address a WebApp chooses can make the operator read, never submit
// a form (docs/progressive-delivery.md promises a GET); the CRD bounds a query at 4096 characters, whose URL (at most 3 times that,
// escaped) is well within what Prometheus's server accepts (1 MiB of request line and headers).
func Query(ctx context.Context, rt http.RoundTripper, address, query string, now time.Time) canary.CheckResult {
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return canary.CheckResult{Err: fmt.Errorf("prometheus address %q: not an http(s) URL", address)}
	}
	// The API's path under the address's own (a Prometheus served under a prefix).
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/query"
	u.RawPath, u.Fragment = "", ""
	u.RawQuery = url.Values{
		"query":   {query},
		"time":    {strconv.FormatFloat(float64(now.UnixNano())/1e9, 'f', -1, 64)},
		"timeout": {Timeout.String()},
	}.Encode()
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return canary.CheckResult{Err: fmt.Errorf("prometheus: %w", err)}
	}
	req.Header.Set("Accept", "application/json")
	resp, body, err := roundTrip(rt, req, true, maxCheckAnswer, errAnswerTooLarge)
	if err != nil {
		return canary.CheckResult{Err: fmt.Errorf("prometheus: %w", err)}
	}
	return decodeAnswer(resp, body)
}

// roundTrip sends req through rt (http.DefaultTransport when nil), following redirects only when told, and reads
// its answer's body up to limit bytes (the decompressed ones, when the transport unzips it); a longer body is
// tooLarge, and is not read further.
func roundTrip(rt http.RoundTripper, req *http.Request, redirects bool, limit int64, tooLarge error) (*http.Response, []byte, error) {
	if rt == nil {
		rt = http.DefaultTransport
	}
	client := &http.Client{Transport: rt}
	if !redirects {
		// The answer is the first one: a redirect is not followed with the request's headers (a credential among
		// them) to wherever it points.
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.ContentLength > limit {
		// Declared too large: nothing of it is read.
		return resp, nil, tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return resp, nil, err
	case int64(len(body)) > limit:
		return resp, nil, tooLarge
	}
	return resp, body, nil
}

// promAnswer is the envelope of Prometheus's query API's answers.
type promAnswer struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

// decodeAnswer is the check's value in an answer of /api/v1/query.
func decodeAnswer(resp *http.Response, body []byte) canary.CheckResult {
	var a promAnswer
	if err := json.Unmarshal(body, &a); err != nil || a.Status == "" {
		// Not the API's JSON (a proxy's error page, another server): say what came, not the JSON's complaint.
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		return canary.CheckResult{Err: fmt.Errorf("prometheus: %s, %q: not an answer of Prometheus's query API", resp.Status, ct)}
	}
	if a.Status != "success" || resp.StatusCode/100 != 2 {
		return canary.CheckResult{Err: fmt.Errorf("prometheus: %s: %s: %s", resp.Status, a.ErrorType, a.Error)}
	}
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(a.Data, &data); err != nil {
		return canary.CheckResult{Err: fmt.Errorf("prometheus: the answer's data: %w", err)}
	}
	var v float64
	switch data.ResultType {
	case "scalar":
		var s model.Scalar
		if err := json.Unmarshal(data.Result, &s); err != nil {
			return canary.CheckResult{Err: fmt.Errorf("prometheus: the answer's scalar: %w", err)}
		}
		v = float64(s.Value)
	case "vector":
		var vec model.Vector
		if err := json.Unmarshal(data.Result, &vec); err != nil {
			return canary.CheckResult{Err: fmt.Errorf("prometheus: the answer's vector: %w", err)}
		}
		switch len(vec) {
		case 0:
			return canary.CheckResult{Value: math.NaN()}
		case 1:
			v = float64(vec[0].Value)
		default:
			return canary.CheckResult{Err: fmt.Errorf("the query returns %d series; a check needs one number (aggregate it, e.g. with sum)", len(vec))}
		}
	default:
		return canary.CheckResult{Err: fmt.Errorf("the query returns a %s; a check needs a scalar or an instant vector", data.ResultType)}
	}
	if math.IsNaN(v) {
		// NaN (0/0: a ratio of a quiet service's requests) is no value, as an empty vector is: what the check's
		// onNoData says.
		return canary.CheckResult{Value: math.NaN()}
	}
	if math.IsInf(v, 0) {
		// +Inf and -Inf (x/0) are not measurements: -Inf is below every max, yet says nothing.
		return canary.CheckResult{Err: errNotFinite(v)}
	}
	return canary.CheckResult{Value: v}
}

// errNotFinite is the failed measurement of a value that is not a finite number.
func errNotFinite(v float64) error {
	return fmt.Errorf("the query's value is %s; a check needs a finite number", canary.FormatValue(v))
}
