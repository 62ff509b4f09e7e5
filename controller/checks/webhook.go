package checks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/example/webapp-operator/controller/canary"
)

// CheckRequest is the body of a webhook check's POST (documented on webappv2.WebhookCheck).
type CheckRequest struct {
	APIVersion     string    `json:"apiVersion"`
	Kind           string    `json:"kind"`
	Namespace      string    `json:"namespace"`
	WebApp         string    `json:"webApp"`
	Check          string    `json:"check"`
	CanaryRevision string    `json:"canaryRevision"`
	StableRevision string    `json:"stableRevision"`
	Step           int       `json:"step"`
	Weight         int32     `json:"weight"`
	Time           time.Time `json:"time"`
}

// NewCheckRequest is a CheckRequest with its apiVersion and kind.
func NewCheckRequest() CheckRequest {
	return CheckRequest{APIVersion: "webapp.example.com/v1", Kind: "CheckRequest"}
}

// maxWebhookAnswer bounds a webhook's answer: one number in a small JSON object.
const maxWebhookAnswer = 64 << 10

// errWebhookAnswerTooLarge is the failed measurement of an answer larger than maxWebhookAnswer.
var errWebhookAnswerTooLarge = fmt.Errorf("the answer is larger than %d KiB; a check needs one number", maxWebhookAnswer>>10)

// Webhook evaluates a webhook check: it POSTs req to address with headers (within timeout, and ctx's bound; a
// header's value is never part of what it returns) and reads the
// value of its answer, {"value": <number or null>}. null, or no value field, is no value (NaN); anything else but a
// 2xx answer of that JSON within maxWebhookAnswer bytes is an error, as is an infinite value.
func Webhook(ctx context.Context, rt http.RoundTripper, address string, timeout time.Duration, headers http.Header, req CheckRequest) canary.CheckResult {
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return canary.CheckResult{Err: fmt.Errorf("webhook URL %q: not an http(s) URL", address)}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return canary.CheckResult{Err: fmt.Errorf("webhook: %w", err)}
	}
	if timeout <= 0 || timeout > Timeout {
		timeout = Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return canary.CheckResult{Err: fmt.Errorf("webhook: %w", err)}
	}
	for name, values := range headers {
		for _, v := range values {
			if !validHeaderValue(v) {
				// Said by name only: the value may be a credential.
				return canary.CheckResult{Err: fmt.Errorf("webhook: the value of header %s is not printable ASCII (a Secret's value with a line break?)", name)}
			}
			httpReq.Header.Add(name, v)
		}
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "application/json")
	resp, answer, err := roundTrip(rt, httpReq, false, maxWebhookAnswer, errWebhookAnswerTooLarge)
	switch {
	case err != nil:
		return canary.CheckResult{Err: fmt.Errorf("webhook: %w", err)}
	case resp.StatusCode/100 != 2:
		return canary.CheckResult{Err: fmt.Errorf("webhook: %s", resp.Status)}
	}
	var a struct {
		Value *json.Number `json:"value"`
	}
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		return canary.CheckResult{Err: fmt.Errorf(`webhook: %s, %q: not an answer of the form {"value": <number or null>}`, resp.Status, ct)}
	}
	if a.Value == nil {
		// null, or no value field: no value, which the check's onNoData decides.
		return canary.CheckResult{Value: math.NaN()}
	}
	v, err := a.Value.Float64()
	if err != nil || math.IsInf(v, 0) {
		return canary.CheckResult{Err: fmt.Errorf("webhook: the value %s is not a finite number", a.Value.String())}
	}
	return canary.CheckResult{Value: v}
}

// validHeaderValue: v can be sent as a header's value (printable ASCII and tabs, as the CRD asks of a value in the
// spec; a Secret's may hold anything).
func validHeaderValue(v string) bool {
	for i := range len(v) {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return v != ""
}
