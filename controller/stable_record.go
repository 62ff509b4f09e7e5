package controller

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
)

// The stable version's record (issue 47). While a canary runs, and after one is rolled back, the stable Deployment
// runs the stable version, not the spec's. Its pod template is data the operator keeps, as a StatefulSet keeps its
// revisions: a ControllerRevision <name>-stable, controlled by the WebApp, holding the pod template the builders
// made for the stable revision (annotated with it). It is written whenever a strategy is set: with the spec's
// template while the spec's version is stable, and read back while a canary holds the stable version; while a
// canary is promoted it keeps the version that served before until the promotion completes, so a person's abort
// can roll the stable Deployment back to it (a promoted canary still stays promoted: its phase says so), and with
// keepPreviousWarm through the rollback window after it, the canary's Deployment running that version's pods from it. Drift on the stable Deployment (another writer's `kubectl set
// image`, which takes the field from our manager) is then repaired from it, and a stable Deployment deleted mid-
// canary or after a rollback comes back. Its data is immutable (the API server refuses a change): a new stable
// version replaces it, deleted with a UID precondition and created again by the reconcile its deletion brings.

// stableRecordName names the record of a WebApp's stable version. (A StatefulSet's revisions are named
// <name>-<hash> with a hash of consonants and digits only, so "stable" is never one of them.)
func stableRecordName(app *webappv2.WebApp) string { return app.Name + "-stable" }

// desiredStableRecord is the record of the stable version (nil: none must exist, without a strategy).
func desiredStableRecord(app *webappv2.WebApp, in inputs) (*appsv1ac.ControllerRevisionApplyConfiguration, error) {
	d, ok, err := in.canary.decided()
	if !ok {
		// No strategy: no record (nil error); undecided: left as it is.
		return nil, err
	}
	var template *corev1ac.PodTemplateSpecApplyConfiguration
	rev := in.canary.revision
	switch {
	case in.canary.hold && in.canary.held == nil:
		return nil, errStableUnknown
	case in.canary.hold:
		// A canary runs or was rolled back: the record keeps what it holds.
		template, rev = in.canary.held, d.State.Stable
	case in.canary.kept != nil:
		// Promoting: the version it replaces stays recorded until the promotion completes (an abort goes back to it).
		template, rev = in.canary.kept, d.State.Stable
	case in.canary.warm != nil:
		// Promoted: the version it replaced stays recorded while it is kept warm (its pods are made from it).
		template, rev = in.canary.warm, d.Warm
	default:
		// Stable, or promoting: the spec's version is (or is about to be) the stable one.
		dep, err := desired.Deployment(app, in.Inputs)
		if err != nil {
			return nil, err
		}
		template = dep.Spec.Template
	}
	data, err := canonicalJSON(template)
	if err != nil {
		return nil, err
	}
	return appsv1ac.ControllerRevision(stableRecordName(app), app.Namespace).
		WithLabels(desired.CommonLabels(app)).
		WithAnnotations(map[string]string{webappv2.AnnotationRevision: rev}).
		WithOwnerReferences(desired.OwnerReference(app)).
		// The record has one revision at a time: a new one replaces it.
		WithRevision(1).
		WithData(runtime.RawExtension{Raw: data}), nil
}

// extractStableRecord is ExtractControllerRevision with the data in canonical form, so that what we own compares
// equal to what we built (the server's JSON orders the keys otherwise).
func extractStableRecord(cr *appsv1.ControllerRevision, manager string) (*appsv1ac.ControllerRevisionApplyConfiguration, error) {
	owned, err := appsv1ac.ExtractControllerRevision(cr, manager)
	if err != nil || owned.Data == nil || len(owned.Data.Raw) == 0 {
		return owned, err
	}
	var v any
	if err := json.Unmarshal(owned.Data.Raw, &v); err != nil {
		return nil, err
	}
	raw, err := canonicalJSON(v)
	if err != nil {
		return nil, err
	}
	owned.Data = &runtime.RawExtension{Raw: raw}
	return owned, nil
}

// canonicalJSON is v as JSON with every object's keys in order (through a generic value: Go's encoder sorts map
// keys).
func canonicalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

// recordReplaced: the record cur cannot become desired by an apply (its data is immutable and differs): it is
// replaced.
func recordReplaced(cur client.Object, desired any) bool {
	cr, ok := cur.(*appsv1.ControllerRevision)
	want, ok2 := desired.(*appsv1ac.ControllerRevisionApplyConfiguration)
	if !ok || !ok2 || want == nil || want.Data == nil {
		return false
	}
	have, err := recordTemplate(cr)
	if err != nil {
		return true
	}
	var next corev1.PodTemplateSpec
	if err := json.Unmarshal(want.Data.Raw, &next); err != nil {
		return false
	}
	return !equality.Semantic.DeepEqual(*have, next) || cr.Annotations[webappv2.AnnotationRevision] != want.Annotations[webappv2.AnnotationRevision]
}

// recordTemplate is the pod template a record holds.
func recordTemplate(cr *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var t corev1.PodTemplateSpec
	if err := json.Unmarshal(cr.Data.Raw, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// heldTemplate is the stable version's template, as its record holds it, when the record is of revision stable
// (nil otherwise).
func heldTemplate(cr *appsv1.ControllerRevision, stable string) *corev1ac.PodTemplateSpecApplyConfiguration {
	if cr == nil || stable == "" || cr.Annotations[webappv2.AnnotationRevision] != stable || len(cr.Data.Raw) == 0 {
		return nil
	}
	t := &corev1ac.PodTemplateSpecApplyConfiguration{}
	if err := json.Unmarshal(cr.Data.Raw, t); err != nil {
		return nil
	}
	return t
}
