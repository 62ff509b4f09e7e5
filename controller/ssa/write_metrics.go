package ssa

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of an apply, the values of the result label of webapp_operator_applies_total.
const (
	ResultSent    = "sent"
	ResultSkipped = "skipped"
	ResultFailed  = "failed"
	ResultDeleted = "deleted"
	ResultPatched = "patched"
)

// The write's own metrics: what it decided for each object, and the applies the server found changed nothing.
var (
	AppliesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webapp_operator_applies_total",
		Help: "Server-Side Applies the operator decided on, by object kind and result: sent, skipped (what our field manager owns already equals the desired state) or failed.",
	}, []string{"kind", "result"})
	NoopAppliesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webapp_operator_noop_applies_total",
		Help: "Applies sent that the server found changed nothing (the resourceVersion stayed), by object kind: what we compare and what the server keeps differ. Each is sent at most once per change of the object.",
	}, []string{"kind"})
)

func init() { metrics.Registry.MustRegister(AppliesTotal, NoopAppliesTotal) }
