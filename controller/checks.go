package controller

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// checkTimeout bounds one check's query: a Prometheus that does not answer fails the check, it does not hold the
// reconcile.
const checkTimeout = 5 * time.Second

// queryCheck evaluates a canary check's PromQL query on the Prometheus at address, at now, with the Prometheus
// client library: its value is a scalar's, or the one sample of an instant vector. An empty vector has no value
// (NaN: the check fails, it never passes on missing data); more than one series is an error, since a check
// compares one number with its threshold.
func queryCheck(ctx context.Context, rt http.RoundTripper, address, query string, now time.Time) checkResult {
	c, err := promapi.NewClient(promapi.Config{Address: address, RoundTripper: rt})
	if err != nil {
		return checkResult{err: fmt.Errorf("prometheus address %q: %w", address, err)}
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	v, _, _, err := promv1.NewAPI(c).Query(ctx, query, now, promv1.WithTimeout(checkTimeout))
	if err != nil {
		return checkResult{err: fmt.Errorf("prometheus: %w", err)}
	}
	switch v := v.(type) {
	case *model.Scalar:
		return checkResult{value: float64(v.Value)}
	case model.Vector:
		switch len(v) {
		case 0:
			return checkResult{value: math.NaN()}
		case 1:
			return checkResult{value: float64(v[0].Value)}
		}
		return checkResult{err: fmt.Errorf("the query returns %d series; a check needs one number (aggregate it, e.g. with sum)", len(v))}
	}
	return checkResult{err: fmt.Errorf("the query returns a %s; a check needs a scalar or an instant vector", v.Type())}
}
