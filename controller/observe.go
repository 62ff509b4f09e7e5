package controller

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/pods"
	"github.com/example/webapp-operator/controller/status"
)

// A reconcile observes, decides, then writes. observe reads, into one value, everything the decisions take besides
// the WebApp: the config hash, the HPA, both Deployments, the canary's state, pods and checks, the claim in the
// way, and, when a rollout is under way or foreseen, the pods, their probes' words and the missing sources. The
// canary's step machine, the builders and the status then decide from that value alone. The writes read what they
// write (ssa.Ensure compares with what our manager owns), and return it: the status reports the Deployment as the
// write left it.

// observed is what a reconcile read before deciding.
type observed struct {
	// inputs are what the builders take (the canary's observation in it, undecided until decide).
	inputs
	// now is the reconcile's clock: the observation's and the step machine's.
	now time.Time
	// stable is app's Deployment as the cache has it (nil: missing, or not app's).
	stable *appsv1.Deployment
	// pods is what app's pods say, when the observation foresaw a rollout.
	pods podsObserved
}

// readInputs reads what the builders take besides the WebApp and the canary: the config hash (through hash), whether
// the HPA exists and whether the Deployment is missing, and a claim in the way. It returns the Deployment as the
// cache has it (nil: missing). observe and Plan both start here.
func (r *WebAppReconciler) readInputs(ctx context.Context, app *webappv2.WebApp, hash func(context.Context, *webappv2.WebApp) (string, error)) (inputs, *appsv1.Deployment) {
	var in inputs
	in.ConfigHash, in.configErr = hash(ctx, app)
	// Read once, for the Deployment's count and the status alike: the HPA decides the count only once it exists.
	in.HPAExists, in.hpaErr = r.hpaExists(ctx, app)
	dep := r.cachedDeployment(ctx, client.ObjectKeyFromObject(app))
	// A Deployment the apply creates (new, or deleted by someone) starts at the WebApp's count, even under an HPA.
	in.DeploymentMissing = in.HPAExists && dep == nil
	// A claim of the WebApp's name that is not its own, or not of its access modes, is never mounted: read before
	// the Deployment is written.
	in.claimErr = r.claimInTheWay(ctx, app)
	// Whatever the canary's decision, its pods never go while the traffic is still sent to them.
	in.traffic, in.trafficErr = r.appliedTrafficOf(ctx, app)
	return in, dep
}

// podsObserved is what app's pods say.
type podsObserved struct {
	// read: they were read (a rollout was under way or foreseen).
	read bool
	// known is false while the pod watch lists them (then no trouble is claimed); listing: it was listing them
	// when they were read.
	known, listing bool
	list           []*pods.Pod
	probes         pods.ProbeFailures
	missing        []string
	// wait is when to look again (0: no need): a pod runs unready, its probes' events change no object.
	wait time.Duration
}

// observe reads what app's reconcile decides from.
func (r *WebAppReconciler) observe(ctx context.Context, app *webappv2.WebApp) observed {
	o := observed{now: r.now().Time}
	key := client.ObjectKeyFromObject(app)
	in, dep := r.readInputs(ctx, app, r.configHash)
	o.inputs = in
	if pods.OwnedDeployment(app, dep) != "" {
		o.stable = dep
	}
	// With a canary strategy: both versions, the canary's pods and checks, and its state.
	o.canary = r.observeCanary(ctx, app, o)
	if rolloutForeseen(app, o) {
		r.watchPods(ctx, key, true)
		o.pods = r.readPods(ctx, app, o.stable)
	}
	return o
}

// rolloutForeseen: app's pods may say why it is not Ready once this reconcile has written: its Deployment is not
// rolled out, the spec changed since the status observed it, the config hash moved, or a canary may run.
func rolloutForeseen(app *webappv2.WebApp, o observed) bool {
	if o.canary != nil && (o.canary.state.Canary != "" || o.canary.revision != o.canary.state.Stable) {
		return true
	}
	dep := o.stable
	if dep == nil {
		// Nothing runs yet: a Deployment created now has no pods before its next event.
		return false
	}
	want := status.DesiredReplicas(app, status.Observation{Dep: dep, ReplicasByHPA: o.configErr == nil && o.hpaErr == nil && desired.ReplicasByHPA(app, o.HPAExists)})
	return !status.RolledOut(dep, want) || app.Generation != app.Status.ObservedGeneration ||
		o.configErr == nil && dep.Spec.Template.Annotations[webappv2.ConfigHashAnnotation] != o.ConfigHash
}

// podsAfterWrites adds to obs what app's pods say and returns when to look again (0: no need). Pods tell more than
// the Deployment only while its rollout is not complete (or a canary runs): only then are they watched. A rollout
// the observation did not foresee (a write that rolled the pods for a reason it could not see, say) has its pods
// read now: the one read after the writes.
func (r *WebAppReconciler) podsAfterWrites(ctx context.Context, app *webappv2.WebApp, o observed, obs *status.Observation) time.Duration {
	needed := needsPods(app, *obs)
	r.watchPods(ctx, client.ObjectKeyFromObject(app), needed)
	if !needed {
		return 0
	}
	p := o.pods
	if !p.read {
		p = r.readPods(ctx, app, obs.Dep)
	}
	obs.Pods, obs.Probes, obs.Missing = p.list, p.probes, p.missing
	// The watch is starting (after a restart, say) and still listed the pods when they were read: a status written
	// now would say what it says without them (a trouble it reported gone, a rollout "progressing"), then with them
	// again. (Whether it lists is read with the pods: a watch that synced since then did not give them to this read.)
	if !p.known && p.listing {
		obs.PodsPending = true
		return pods.Recheck
	}
	return p.wait
}
