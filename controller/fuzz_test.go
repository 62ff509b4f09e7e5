package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/status"
)

// FuzzBuilders builds the children and the status of random WebApps (and random Deployments as last seen): no
// input panics, and building twice gives the same bytes, whatever the map iteration order. The seeds run in every
// `go test`; `make fuzz` searches further.
func FuzzBuilders(f *testing.F) {
	for i := range 16 {
		f.Add(fmt.Appendf(nil, "seed %d", i))
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0x00, 0x7f, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		fill := randfill.NewFromGoFuzz(data).NilChance(0.3).NumElements(0, 4).Funcs(
			// Quantities have no exported fields to fill: pick a value and a format.
			func(q *resource.Quantity, c randfill.Continue) {
				formats := []resource.Format{resource.DecimalSI, resource.BinarySI, resource.DecimalExponent}
				*q = *resource.NewMilliQuantity(c.Int63n(1<<50), formats[c.Intn(len(formats))])
			},
		)
		var in struct {
			App       webappv2.WebApp
			Dep       *appsv1.Deployment // nil: none yet
			ApplyErr  *string            // nil: the children were applied
			Now       uint32
			HPAExists bool
		}
		fill.Fill(&in)
		app, dep, now, hpa := &in.App, in.Dep, metav1.Unix(int64(in.Now), 0), in.HPAExists
		var applyErr error
		if in.ApplyErr != nil {
			applyErr = errors.New(*in.ApplyErr)
		}

		first := build(t, app, dep, hpa, applyErr, now)
		if second := build(t, app, dep, hpa, applyErr, now); !maps.Equal(first, second) {
			for what := range first {
				if first[what] != second[what] {
					t.Fatalf("%s differs between two builds of the same WebApp:\n%s\n%s", what, first[what], second[what])
				}
			}
		}

		// The API server refuses a Deployment whose selector does not select its own pod template.
		d, err := desired.Deployment(app, desired.Inputs{ConfigHash: "hash", HPAExists: hpa})
		if err != nil {
			return
		}
		// The count is in our apply exactly while no HPA decides it, and then in the HPA's range.
		if byHPA := desired.ReplicasByHPA(app, hpa); (d.Spec.Replicas == nil) != byHPA {
			t.Fatalf("replicas %v in the Deployment with the HPA deciding: %v", d.Spec.Replicas, byHPA)
		}
		if a := app.Spec.Autoscaling; a != nil && d.Spec.Replicas != nil && a.MaxReplicas >= ptr.Deref(a.MinReplicas, 1) &&
			(*d.Spec.Replicas < ptr.Deref(a.MinReplicas, 1) || *d.Spec.Replicas > a.MaxReplicas) {
			t.Fatalf("replicas %d outside autoscaling's [%v, %d]", *d.Spec.Replicas, a.MinReplicas, a.MaxReplicas)
		}
		for k, v := range d.Spec.Selector.MatchLabels {
			if d.Spec.Template.Labels[k] != v {
				t.Fatalf("selector %v does not select the pod template labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
			}
		}
	})
}

// build runs every builder on its inputs and returns each result as JSON (or its error).
func build(t *testing.T, app *webappv2.WebApp, dep *appsv1.Deployment, hpaExists bool, applyErr error, now metav1.Time) map[string]string {
	t.Helper()
	out := map[string]string{}
	encode := func(what string, v any, err error) {
		if err != nil {
			out[what] = "error: " + err.Error()
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("encoding %s: %v", what, err)
		}
		out[what] = string(b)
	}
	d, err := desired.Deployment(app, desired.Inputs{ConfigHash: "hash", HPAExists: hpaExists})
	encode("Deployment", d, err)
	encode("Service", desired.Service(app, canary.Traffic{}), nil)
	encode("PodDisruptionBudget", desired.PDB(app), nil)
	byHPA := desired.ReplicasByHPA(app, hpaExists)
	encode("status", status.Desired(app, app, status.Observation{Dep: dep, Known: dep != nil, ReplicasByHPA: byHPA}, applyErr, now), nil)
	return out
}
