package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
)

// The canary's objects (spec.rollout.canary). While a canary runs, the new version
// runs beside the stable one in a Deployment of its own, <name>-canary, whose pods carry LabelCanaryOf and never
// the stable pods' instance label behind a Gateway: the stable Service (and PodDisruptionBudget) then never select
// them, and the route's weights between the stable and the canary Service are the traffic's split exactly. Without
// a Gateway the canary's pods also carry the instance label, so the one Service selects both versions and the
// split is by replicas. A blue/green without a Gateway is the third form: the canary's pods never carry the
// instance label, as behind a route, and the WebApp's Service is the switch (its selector is the canary's while it
// is sent all the traffic, CanarySwitched). The canary Deployment's selector is the same in every form (a selector
// is immutable): a change of form rolls the canary's pods, it never needs a new Deployment.

// CanaryName names the canary's Deployment and Service.
func CanaryName(app *webappv2.WebApp) string { return app.Name + "-canary" }

// CanaryShared says that without a Gateway the canary's pods join the one Service, and the traffic is split by
// replicas (a blue/green's excepted: CanarySwitched).
func CanaryShared(app *webappv2.WebApp) bool {
	return !Routed(app) && !blueGreen(app)
}

// CanarySwitched says that without a Gateway a blue/green's traffic is switched by the WebApp's Service: its
// selector is the canary's pods' while the canary is sent all the traffic, the stable pods' otherwise. The switch
// is one write, as the route's is; the EndpointSlices and every node's proxy follow it within a second or so.
func CanarySwitched(app *webappv2.WebApp) bool {
	return !Routed(app) && blueGreen(app)
}

// SelectsCanary says that selector (a Service's) is the canary's pods': a blue/green's switch without a Gateway
// sends them all the traffic.
func SelectsCanary(app *webappv2.WebApp, selector map[string]string) bool {
	return maps.Equal(selector, canarySelector(app))
}

// CanaryRetire is how long app's canary pods stay after the traffic left them (spec.rollout.canary.retireSeconds,
// or canary.Retire).
func CanaryRetire(app *webappv2.WebApp) time.Duration {
	if c := app.Spec.Rollout.Canary; c != nil && c.RetireSeconds > 0 {
		return time.Duration(c.RetireSeconds) * time.Second
	}
	return canary.Retire
}

// Routed says that a route (expose.gateway) splits the traffic between the stable and the canary Service.
func Routed(app *webappv2.WebApp) bool {
	return app.Spec.Expose != nil && app.Spec.Expose.Gateway != nil
}

// blueGreen: the strategy is a blue/green.
func blueGreen(app *webappv2.WebApp) bool {
	return app.Spec.Rollout.Canary != nil && app.Spec.Rollout.Canary.BlueGreen != nil
}

// CanaryReplicas is the canary's count for weight percent of the traffic beside stable pods that keep theirs
// (never fewer, so the stable version's capacity does not dip, and an HPA's count stays its own): behind a route,
// weight percent of the stable count (the route sends the canary its share whatever its count); sharing the one
// Service, the count that makes weight percent of all pods. At least one, and never more than bound, the most
// pods the WebApp may run (its replicas, or its autoscaling maximum): a split by replicas asks for
// stable×weight/(100−weight) pods, 990 beside 10 at 99%, which only a bound keeps from starving the cluster; a
// step above what the bound allows gets the bound's share (half the pods when the stable count is the bound).
func CanaryReplicas(stable, bound, weight int32, shared bool) int32 {
	if weight <= 0 {
		return 0
	}
	var n int64
	switch {
	case shared && weight >= 100:
		// The whole share: as many as stable (the bound caps it below).
		n = int64(stable)
	case shared:
		// n / (n + stable) >= weight / 100, the least such n.
		n = (int64(stable)*int64(weight) + int64(100-weight) - 1) / int64(100-weight)
	default:
		n = (int64(stable)*int64(weight) + 99) / 100
	}
	return int32(max(min(n, int64(bound)), 1))
}

// CanaryBound is the most pods a canary may have: the most the WebApp may run, its autoscaling maximum when it
// autoscales, its replicas otherwise.
func CanaryBound(app *webappv2.WebApp) int32 {
	if a := app.Spec.Autoscaling; a != nil {
		return max(a.MaxReplicas, 1)
	}
	return WebAppReplicas(app)
}

// canarySelector selects a canary's pods.
func canarySelector(app *webappv2.WebApp) map[string]string {
	return map[string]string{webappv2.LabelName: webappv2.AppName, webappv2.LabelCanaryOf: app.Name}
}

// CanaryDeployment is the canary's Deployment for a decision d beside a stable Deployment of stable pods: the
// WebApp's Deployment as the spec asks for it now, under the canary's name, selector and labels, with the canary's
// count (no HPA decides it; at most CanaryBound(app)) and its revision. While the version a promotion replaced is
// kept warm (d.Warm), its pod template is warm's, the record's (nil: not known, no Deployment). nil while there is
// no canary: it must not exist.
func CanaryDeployment(app *webappv2.WebApp, in Inputs, d canary.Decision, stable int32, warm *corev1ac.PodTemplateSpecApplyConfiguration) (*appsv1ac.DeploymentApplyConfiguration, error) {
	if d.ReplicaWeight <= 0 || d.Warm != "" && warm == nil {
		return nil, nil
	}
	dep, err := Deployment(app, Inputs{ConfigHash: in.ConfigHash})
	if err != nil {
		return nil, err
	}
	// The version it runs: the canary's, the one rolled back while its pods retire, or the one kept warm.
	rev := d.State.Canary
	switch {
	case d.Warm != "":
		// (The record's template is the stable Deployment's as the builders made it: the labels below are the
		// canary's, as the canary of that spec would have them.)
		t, err := clonedTemplate(warm)
		if err != nil {
			return nil, err
		}
		rev, dep.Spec.Template = d.Warm, t
	case rev == "":
		rev = d.State.Failed
	}
	labels := maps.Clone(dep.Spec.Template.Labels)
	maps.Copy(labels, canarySelector(app))
	// Its pods say which version they are: a new canary's pods are told from the last one's still going.
	labels[webappv2.LabelCanaryRevision] = rev
	if !CanaryShared(app) {
		// Behind a route: the stable Service must not select the canary's pods.
		delete(labels, webappv2.LabelInstance)
	}
	dep.Name = ptr.To(CanaryName(app))
	dep.Spec.Template.Labels = labels
	dep.Spec.Selector = metav1ac.LabelSelector().WithMatchLabels(canarySelector(app))
	dep.Spec.WithReplicas(CanaryReplicas(stable, CanaryBound(app), d.ReplicaWeight, CanaryShared(app)))
	dep.WithAnnotations(map[string]string{webappv2.AnnotationRevision: rev})
	return dep, nil
}

// CanaryService is the canary's Service behind a route, or a blue/green's preview without one (the stable
// Service's ports, the canary's pods, those of a version the spec left while they retire too: the gateway may still
// send them a request); nil without a canary, or when the one Service serves both (CanaryShared).
func CanaryService(app *webappv2.WebApp, d canary.Decision) *corev1ac.ServiceApplyConfiguration {
	if d.ReplicaWeight <= 0 && d.State.Retiring == "" || CanaryShared(app) {
		return nil
	}
	spec := corev1ac.ServiceSpec().WithType(corev1.ServiceTypeClusterIP).WithSelector(canarySelector(app)).WithPorts(servicePorts(app)...)
	return corev1ac.Service(CanaryName(app), app.Namespace).
		WithLabels(CommonLabels(app)).
		WithOwnerReferences(OwnerReference(app)).
		WithSpec(spec)
}

// RouteBackends are the route's backends for the canary's weight: the stable Service alone (weight 1, as a route
// without a canary has always been written, so taking the strategy rewrites no route), or both Services by their
// percentages.
func RouteBackends(app *webappv2.WebApp, weight int32) []*gwv1ac.HTTPBackendRefApplyConfiguration {
	if weight <= 0 {
		return []*gwv1ac.HTTPBackendRefApplyConfiguration{serviceBackend(app, app.Name, 1)}
	}
	return []*gwv1ac.HTTPBackendRefApplyConfiguration{serviceBackend(app, app.Name, 100-weight), serviceBackend(app, CanaryName(app), weight)}
}

// serviceBackend is a route's backend: Service name of app, on the primary port, at weight w (every field the
// CRD defaults set).
func serviceBackend(app *webappv2.WebApp, name string, w int32) *gwv1ac.HTTPBackendRefApplyConfiguration {
	return gwv1ac.HTTPBackendRef().WithGroup("").WithKind("Service").WithName(gwv1.ObjectName(name)).WithPort(ports(app)[0].Port).WithWeight(w)
}

// Revision names a version of the pods: a hash of the pod template the builders make (the config hash in it, so a
// changed ConfigMap is a new version too). The same spec gives the same revision in every process.
func Revision(t *corev1ac.PodTemplateSpecApplyConfiguration) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16], nil
}

// clonedTemplate is a copy of t the builder may change (t is the caller's: the record's too).
func clonedTemplate(t *corev1ac.PodTemplateSpecApplyConfiguration) (*corev1ac.PodTemplateSpecApplyConfiguration, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	out := &corev1ac.PodTemplateSpecApplyConfiguration{}
	return out, json.Unmarshal(raw, out)
}

// SizeWords say how large a canary counted for pct percent of the stable version's count is (a blue/green's
// preview: previewPercent).
func SizeWords(pct int32) string {
	if pct >= 100 {
		return "at full size"
	}
	return fmt.Sprintf("at %d%% of the stable count", pct)
}
