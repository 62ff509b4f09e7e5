package actions

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

// ReasonFieldsRetained is the Ready reason of a WebApp whose Deployment keeps a field the WebApp no longer wants,
// because another field manager co-owns it; the message names the field and the manager.
const ReasonFieldsRetained = "FieldsRetained"

// The env vars and pod labels the specs draw: ones of them on the Deployment that the spec does not want were
// ours once (the "ops" manager adds only OPS_ env vars and ops.example.com labels on the Deployment itself).
var (
	specEnvNames   = []string{"A", "B", "C"}
	specLabelNames = []string{"team", "version", "tier"}
)

// check runs the invariants that hold after every step: on every version of every object the watches recorded,
// and on the deletions that completed.
func (s *seq) check() {
	s.hist.sync(s.reporting(), s.ns)
	s.store().sync(s.reporting(), s.ns)
	s.settleDeletions()
	s.checkResurrections()
	s.checkForeign()
	s.checkStatusClaims()
	s.checkMounts()
	s.checkClaimsAtRest()
	s.checkCanaryNeverUnderTheSwitch()
	for _, a := range s.apps {
		if since := time.Since(s.created[a.uid]); a.state == alive && !s.shown[a.uid] && since > promptStatus {
			s.fail("invariant 5 (a WebApp says how it is): WebApp %s (uid %s) has had no Ready condition for %v since its creation, more than %v",
				a.name, a.uid, since.Round(100*time.Millisecond), promptStatus)
		}
	}
}

// checkResurrections: invariant 1. A child a user deleted while its WebApp was gone or being deleted never
// reappears, unless the test itself created that name again.
func (s *seq) checkResurrections() {
	for _, m := range s.marks {
		vs := s.hist.versions(m.kind, m.name)
		var deletedAt int64
		for _, v := range vs {
			if v.deleted && v.obj.GetUID() == m.uid {
				deletedAt = v.rv
			}
		}
		if deletedAt == 0 {
			continue
		}
		for _, v := range vs {
			uid := v.obj.GetUID()
			if v.deleted || uid == m.uid || s.ours[uid] || v.rv <= deletedAt || (m.clearedAt != 0 && v.rv >= m.clearedAt) {
				continue
			}
			s.fail("invariant 1 (nothing a user deleted comes back): %s %s, deleted at step %d while its WebApp was gone or being deleted, "+
				"was created again (uid %s, resourceVersion %d) by someone other than the test:\n%s", m.kind, m.name, m.step, uid, v.rv, toYAML(v.obj.Object))
		}
	}
}

// checkForeign: invariant 3. An object the test created without our labels (a Deployment, Service or
// PersistentVolumeClaim of a WebApp's name) never gets an owner reference to a WebApp, our managed-by label, or a
// managedFields entry of our field manager.
func (s *seq) checkForeign() {
	for _, vs := range [][]version{s.hist.all(deploymentKind.name), s.hist.all(serviceKind.name), s.store().hist.all(pvcKind.name)} {
		for _, v := range vs {
			what, ok := s.foreign[v.obj.GetUID()]
			if !ok {
				continue
			}
			var taken []string
			for _, ref := range v.obj.GetOwnerReferences() {
				if ref.Kind == "WebApp" {
					taken = append(taken, fmt.Sprintf("an ownerReference to WebApp %s (uid %s)", ref.Name, ref.UID))
				}
			}
			if v.obj.GetLabels()[webappv2.LabelManagedBy] == webappv2.ManagedBy {
				taken = append(taken, "our managed-by label")
			}
			for _, e := range v.obj.GetManagedFields() {
				if e.Manager == webappv2.FieldManager {
					taken = append(taken, fmt.Sprintf("a managedFields entry of %s (%s)", e.Manager, e.Operation))
				}
			}
			if len(taken) > 0 {
				s.fail("invariant 3 (nothing foreign is taken over): the foreign %s (uid %s) got %s at resourceVersion %d:\n%s",
					what, v.obj.GetUID(), strings.Join(taken, ", "), v.rv, toYAML(v.obj.Object))
			}
		}
	}
}

// checkStatusClaims: invariants 4 and 5 on every status the WebApps ever had. Ready=True or
// Progressing=False/RolloutComplete at generation g needs a version of the Deployment, stored before that
// status, with g's spec and observed by the Deployment controller; a Ready that is not True says why.
func (s *seq) checkStatusClaims() {
	vs := s.hist.all(webAppKind.name)
	// A status can be judged once the Deployment watch has recorded everything up to it.
	bound := s.hist.seen(deploymentKind.name)
	for ; s.cursor < len(vs) && vs[s.cursor].rv <= bound; s.cursor++ {
		v := vs[s.cursor]
		if v.deleted {
			continue
		}
		app := &webappv1.WebApp{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(v.obj.Object, app); err != nil {
			s.fail("decoding a WebApp version: %v", err)
		}
		ready := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady)
		for _, c := range app.Status.Conditions {
			if strings.Contains(c.Message, "impostor") || strings.Contains(c.Message, "node affinity/selector") {
				s.fail("invariant 4 (status claims only what happened): WebApp %s at resourceVersion %d reports a pod its Deployment did not make in %s=%s %s %q:\n%s",
					app.Name, v.rv, c.Type, c.Status, c.Reason, c.Message, toYAML(v.obj.Object))
			}
		}
		if ready != nil && ready.Status != metav1.ConditionTrue && (ready.Reason == "" || ready.Message == "") {
			s.fail("invariant 5 (a WebApp that is not Ready says why): WebApp %s at resourceVersion %d has Ready=%s with reason %q and message %q:\n%s",
				app.Name, v.rv, ready.Status, ready.Reason, ready.Message, toYAML(v.obj.Object))
		}
		if ready != nil && !s.shown[app.UID] {
			s.shown[app.UID] = true
			if late := v.at.Sub(s.created[app.UID]); late > promptStatus {
				s.fail("invariant 5 (a WebApp says how it is): WebApp %s (uid %s) showed its first Ready condition %v after its creation, more than %v:\n%s",
					app.Name, app.UID, late.Round(100*time.Millisecond), promptStatus, toYAML(v.obj.Object))
			}
		}
		if ready != nil && ready.Status == metav1.ConditionTrue {
			s.checkClaim(app, v, "Ready=True", ready.ObservedGeneration)
		}
		if p := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionProgressing); p != nil &&
			p.Status == metav1.ConditionFalse && p.Reason == webappv2.ReasonRolloutComplete {
			s.checkClaim(app, v, "Progressing=False/RolloutComplete", p.ObservedGeneration)
		}
	}
}

func (s *seq) checkClaim(app *webappv1.WebApp, v version, claim string, g int64) {
	key := fmt.Sprintf("%s/%s/%d", app.UID, claim, g)
	if s.claims[key] {
		return
	}
	s.claims[key] = true
	spec, ok := s.specs[app.UID][g]
	if !ok {
		s.fail("invariant 4 (status claims only what the Deployment got): WebApp %s shows %s at generation %d, which the test never set:\n%s",
			app.Name, claim, g, toYAML(v.obj.Object))
	}
	var last *unstructured.Unstructured
	var why string
	for _, d := range s.hist.versions(deploymentKind.name, app.Name) {
		if d.rv > v.rv {
			break
		}
		if d.deleted || !controlledBy(d.obj, app.UID) {
			continue
		}
		dep := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.obj.Object, dep); err != nil {
			s.fail("decoding a Deployment version: %v", err)
		}
		last = d.obj
		why = mismatch(dep, spec, s.autoscaled(app.UID, g))
		if why == "" && dep.Status.ObservedGeneration < dep.Generation {
			why = fmt.Sprintf("the Deployment controller had observed generation %d of %d", dep.Status.ObservedGeneration, dep.Generation)
		}
		if why == "" {
			return
		}
	}
	lastYAML := "(none: no Deployment controlled by this WebApp was ever stored before)"
	if last != nil {
		lastYAML = fmt.Sprintf("(%s)\n%s", why, toYAML(last.Object))
	}
	s.fail("invariant 4 (status claims only what the Deployment got): WebApp %s showed %s at generation %d (resourceVersion %d), "+
		"but no version of its Deployment stored before had generation %d's spec (%s) and had been observed by the Deployment controller.\n"+
		"The WebApp then:\n%s\nIts Deployment's last version before that %s", app.Name, claim, g, v.rv, g, specSummary(spec), toYAML(v.obj.Object), lastYAML)
}

// mismatch says how dep's pod template differs from what spec asks for ("" when it has it): the image, replicas,
// every env var and pod label of the spec. (Fields other managers add, or keep, are judged by invariant 5.)
func mismatch(dep *appsv1.Deployment, spec webappv1.WebAppSpec, autoscaled *bounds) string {
	i := slices.IndexFunc(dep.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "app" })
	if i < 0 {
		return "no container app"
	}
	c := dep.Spec.Template.Spec.Containers[i]
	var diffs []string
	if c.Image != spec.Image {
		diffs = append(diffs, fmt.Sprintf("image %s", c.Image))
	}
	switch r := dep.Spec.Replicas; {
	case autoscaled != nil && (r == nil || *r < autoscaled.min || *r > autoscaled.max):
		// Autoscaled: the HPA's count or, while no HPA exists, the WebApp's clamped into the bounds.
		diffs = append(diffs, fmt.Sprintf("replicas %v outside the autoscaling bounds %d..%d", ptr.Deref(r, -1), autoscaled.min, autoscaled.max))
	case autoscaled == nil && (r == nil || *r != spec.Replicas):
		diffs = append(diffs, fmt.Sprintf("replicas %v", dep.Spec.Replicas))
	}
	for _, e := range spec.Env {
		if !slices.ContainsFunc(c.Env, func(have corev1.EnvVar) bool { return have.Name == e.Name }) {
			diffs = append(diffs, "no env var "+e.Name)
		}
	}
	for k, v := range spec.PodLabels {
		if got, ok := dep.Spec.Template.Labels[k]; !ok || got != v {
			diffs = append(diffs, fmt.Sprintf("pod label %s=%q", k, got))
		}
	}
	return strings.Join(diffs, ", ")
}

// maxReplicas is the most pods a generation runs: its autoscaling's maximum, or its replicas.
func maxReplicas(spec webappv1.WebAppSpec, autoscaled *bounds) int32 {
	if autoscaled != nil {
		return autoscaled.max
	}
	return spec.Replicas
}

func specSummary(spec webappv1.WebAppSpec) string {
	var env []string
	for _, e := range spec.Env {
		env = append(env, e.Name)
	}
	return fmt.Sprintf("image %s, replicas %d, env %v, podLabels %v", spec.Image, spec.Replicas, env, spec.PodLabels)
}

// gone reports whether the WebApp of deletion d no longer exists (none of its name, or a new one).
func (s *seq) gone(d *deletion) bool {
	u := s.get(webAppKind, d.name)
	return u == nil || u.GetUID() != d.uid
}

// settleDeletions checks the deletions whose WebApp is gone.
func (s *seq) settleDeletions() {
	var left []*deletion
	for _, d := range s.pending {
		if !s.gone(d) {
			left = append(left, d)
			continue
		}
		s.settleDeletion(d)
		for _, a := range s.apps {
			if a.name == d.name && a.uid == d.uid && a.state == deleting {
				a.state = absent
			}
		}
	}
	s.pending = left
}

// settleDeletion checks a WebApp the test deleted and that is now gone: once the garbage collector has processed
// its disappearance (it deleted the sentinel the WebApp owned), children it released (Orphan policy with our
// finalizer) still exist without an owner reference to it (invariant 2); otherwise its children are
// garbage-collected (invariant 1).
func (s *seq) settleDeletion(d *deletion) {
	tb := s.reporting()
	s.stats.deletions++
	if d.release {
		s.stats.releases++
	}
	testutil.Eventually(tb, convergeTimeout, fmt.Sprintf("the garbage collector deleted ConfigMap %s, owned by the deleted WebApp %s", d.sentinel, d.name),
		func(ctx context.Context) error {
			switch err := k8s.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: d.sentinel}, &corev1.ConfigMap{}); {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			}
			return errors.New("still there")
		})
	if d.release {
		// The garbage collector has passed; the window shows it does not delete the released children either.
		testutil.Consistently(tb, 2*time.Second, fmt.Sprintf("invariant 2 (a released child survives garbage collection): the children of WebApp %s "+
			"(uid %s, deleted at step %d with the Orphan policy and our finalizer) are released", d.name, d.uid, d.step), func(context.Context) error {
			for _, k := range childKinds {
				uid, ok := d.candidates[k.name]
				if !ok || (k == pdbKind && d.replicas < 2) || s.userDeleted(uid) {
					continue
				}
				u := s.get(k, d.name)
				if u == nil || u.GetUID() != uid {
					return fmt.Errorf("%s %s (uid %s) was deleted; its last version:\n%s", k.name, d.name, uid, s.lastVersion(k, d.name, uid))
				}
				for _, ref := range u.GetOwnerReferences() {
					if ref.UID == d.uid {
						return fmt.Errorf("%s %s still has an ownerReference to the deleted WebApp:\n%s", k.name, d.name, toYAML(u.Object))
					}
				}
			}
			return nil
		})
	} else {
		testutil.Eventually(tb, convergeTimeout, fmt.Sprintf("invariant 1 (with policy Delete the children end garbage-collected): the children of WebApp %s (uid %s, deleted at step %d)",
			d.name, d.uid, d.step), func(context.Context) error {
			for _, k := range childKinds {
				if u := s.get(k, d.name); u != nil && slices.ContainsFunc(u.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == d.uid }) {
					return fmt.Errorf("%s %s still exists with an ownerReference to it", k.name, d.name)
				}
			}
			return nil
		})
	}
	s.claimKeptOrGone(d)
	s.canaryLeftovers(d)
}

// userDeleted reports whether a user deleted the object of uid after its WebApp was deleted.
func (s *seq) userDeleted(uid types.UID) bool {
	return slices.ContainsFunc(s.marks, func(m *mark) bool { return m.uid == uid })
}

// lastVersion is the last recorded version of the object kind/name of uid, as YAML.
func (s *seq) lastVersion(k kind, name string, uid types.UID) string {
	vs := s.hist.versions(k.name, name)
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].obj.GetUID() == uid {
			return toYAML(vs[i].obj.Object)
		}
	}
	return "(never recorded)"
}

// waitDeletions waits until every WebApp the test deleted is gone, and checks what must follow.
func (s *seq) waitDeletions() {
	testutil.Eventually(s.reporting(), convergeTimeout, "every deleted WebApp gone (nothing blocks a deletion)", func(context.Context) error {
		for _, d := range s.pending {
			if !s.gone(d) {
				// Read again for the message: it may have gone since (then the next poll says so).
				if u := s.get(webAppKind, d.name); u != nil {
					return fmt.Errorf("WebApp %s still there:\n%s", d.name, toYAML(u.Object))
				}
				return fmt.Errorf("WebApp %s still there", d.name)
			}
		}
		return nil
	})
	s.settleDeletions()
}

// quiesce stops the actors and checks rest: every WebApp converges or says why (invariant 5), then three
// resyncs, and three more after a restart of the operator, write nothing (invariant 6).
func (s *seq) quiesce() {
	if s.faults.Load() != nil {
		s.removeFault()
	}
	if s.hpasRefused {
		// Like an API fault, the quota goes before rest is judged (a restart retries a refused HPA once).
		s.actRefuseHPAs(nil)
	}
	s.record("the actors stop", "# from here on only the operator acts: every WebApp must converge or say why, then nothing is written")
	s.waitDeletions()
	testutil.Eventually(s.reporting(), convergeTimeout, "invariant 5 (every WebApp converges or says why)", func(ctx context.Context) error {
		for _, a := range s.apps {
			if a.state == alive {
				if err := s.converged(ctx, a); err != nil {
					return err
				}
				if err := s.canaryConverged(ctx, a); err != nil {
					return err
				}
				if err := s.routeConverged(ctx, a); err != nil {
					return err
				}
			}
		}
		return nil
	})
	s.check()
	for _, a := range s.apps {
		if a.state == alive {
			s.checkRetained(a)
			s.checkCanaryAtRest(a)
			s.checkRouteAtRest(a)
		}
	}

	s.writes.take()
	rest := time.Now()
	waitResyncs(s.reporting(), 3, requeue)
	s.zeroWrites("at rest, over 3 resyncs", rest, nil)

	// A restarted operator remembers nothing: a refused Deployment may be tried once more (with its event),
	// nothing else.
	retried := map[string]bool{}
	for _, a := range s.apps {
		retried[a.name] = a.state == alive && refused(a.spec)
	}
	s.restart()
	restart := time.Now()
	waitResyncs(s.reporting(), 3, requeue)
	s.zeroWrites("after a restart of the operator, over 3 resyncs", restart, retried)
	s.check()
}

// converged says what keeps WebApp a from having converged, nil once it has: its status describes its
// generation, and it is Ready with its children in place, or says why not (a foreign object, a spec the
// Deployment API refuses, fields another manager keeps).
func (s *seq) converged(ctx context.Context, a *app) error {
	app := &webappv1.WebApp{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: a.name}, app); err != nil {
		return err
	}
	ready := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady)
	progressing := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionProgressing)
	if ready == nil || progressing == nil || ready.ObservedGeneration != app.Generation || progressing.ObservedGeneration != app.Generation ||
		app.Status.ObservedGeneration != app.Generation {
		return fmt.Errorf("WebApp %s: the status does not describe generation %d:\n%s", a.name, app.Generation, toYAML(app.Status))
	}
	blocking := s.blocking(a.name)
	if refused(app.Spec) {
		blocking = append(blocking, "its spec is refused by the Deployment API")
	}
	if unschedulable(app.Spec) {
		blocking = append(blocking, "its pods ask for more CPU than the node has")
	}
	if stableUnknown(ready) {
		blocking = append(blocking, "the stable version's template is lost mid-canary (its record and the stable Deployment both edited or deleted)")
	}
	if n, lo, hi, ok := s.hpaCountOutside(a.name, app); ok {
		blocking = append(blocking, fmt.Sprintf("its HPA's count %d is outside the bounds %d..%d set since, and no HPA controller runs in this cluster to bring it inside", n, lo, hi))
	}
	if len(blocking) > 0 {
		if ready.Status == metav1.ConditionTrue || ready.Reason == "" || ready.Message == "" {
			return fmt.Errorf("WebApp %s: Ready=%s %s %q although %s", a.name, ready.Status, ready.Reason, ready.Message, strings.Join(blocking, ", "))
		}
		return nil
	}
	if ready.Status != metav1.ConditionTrue && ready.Reason == webappv2.ReasonRolledBack && ready.Message != "" {
		// The last canary was rolled back: the stable version serves, and Ready says what failed.
		return nil
	}
	if ready.Status != metav1.ConditionTrue && (ready.Reason != ReasonFieldsRetained || ready.Message == "") {
		return fmt.Errorf("WebApp %s: Ready=%s %s %q, want True (or False %s)\n%s", a.name, ready.Status, ready.Reason, ready.Message, ReasonFieldsRetained,
			s.deploymentState(a.name))
	}
	for _, k := range childKinds {
		want := k != pdbKind || maxReplicas(app.Spec, s.autoscaled(app.UID, app.Generation)) >= 2
		u := s.get(k, a.name)
		switch {
		case want && (u == nil || !controlledBy(u, app.UID)):
			return fmt.Errorf("WebApp %s is Ready but its %s is missing or not controlled by it", a.name, k.name)
		case !want && u != nil:
			return fmt.Errorf("WebApp %s has 1 replica but a %s", a.name, k.name)
		}
	}
	return nil
}

// hpaCountOutside reports whether WebApp name's HPA sets its count (status.replicasSetBy) and its Deployment's count
// n is outside the bounds lo..hi its spec has now (changed since the count was set): no HPA controller runs in this
// cluster, so nothing brings it inside, and Ready says it waits for that.
func (s *seq) hpaCountOutside(name string, app *webappv1.WebApp) (n, lo, hi int32, ok bool) {
	v2, u := s.getV2(name), s.get(deploymentKind, name)
	if v2 == nil || v2.Spec.Autoscaling == nil || app.Status.ReplicasSetBy != "HorizontalPodAutoscaler" || u == nil {
		return 0, 0, 0, false
	}
	r, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		return 0, 0, 0, false
	}
	n, lo, hi = int32(r), ptr.Deref(v2.Spec.Autoscaling.MinReplicas, 1), v2.Spec.Autoscaling.MaxReplicas
	return n, lo, hi, n < lo || n > hi
}

// blocking lists the foreign objects of name that exist and keep its WebApp from Ready: a foreign Deployment or
// Service, or a foreign claim when the WebApp has a claim volume (beside a WebApp that mounts no claim of its name it
// blocks nothing); and its own claim being deleted while a pod waits for it.
func (s *seq) blocking(name string) []string {
	var out []string
	for uid, what := range s.foreign {
		k, n, _ := strings.Cut(what, "/")
		if n != name {
			continue
		}
		kk := map[string]kind{deploymentKind.name: deploymentKind, serviceKind.name: serviceKind, pvcKind.name: pvcKind}[k]
		if kk == pvcKind && !s.hasClaimVolume(name) {
			continue
		}
		if u := s.get(kk, n); u != nil && u.GetUID() == uid {
			out = append(out, "the foreign "+what+" exists")
		}
	}
	return append(out, s.claimBlocking(name)...)
}

// checkRetained: invariant 5 for fields another manager keeps. When the converged Deployment still has an env
// var or pod label of ours the spec no longer wants (another manager co-owns it), Ready says so: False with
// reason FieldsRetained and a message naming the manager.
//
// "Of ours" is what this WebApp (its uid) asked for at some generation: its applies set the field, then let go of
// it. A field only a WebApp of the name before this one asked for is ours only if that one's last apply still set
// it before it released the Deployment (Orphan), which the test does not know: either answer is right for it. A
// field no WebApp of the name asked for is another manager's own, as any field a person adds.
func (s *seq) checkRetained(a *app) {
	if len(s.blocking(a.name)) > 0 || refused(a.spec) || unschedulable(a.spec) {
		return
	}
	if v2 := s.getV2(a.name); v2 != nil && v2.Status.Canary != nil && v2.Status.Canary.Phase != "Stable" {
		// Rolled back: the stable Deployment runs the stable version, not the spec's (invariant 8 judges it).
		return
	}
	dep := &appsv1.Deployment{}
	app := &webappv1.WebApp{}
	ctx := context.Background()
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: a.name}, app); err != nil {
		s.fail("reading WebApp %s: %v", a.name, err)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: a.name}, dep); err != nil {
		s.fail("reading Deployment %s: %v", a.name, err)
	}
	mine, inherited := s.askedFor(app.UID), map[string]bool{}
	for _, uid := range a.before {
		maps.Copy(inherited, s.askedFor(uid))
	}
	var kept, maybe []string
	sortOut := func(what string) {
		switch {
		case mine[what]:
			kept = append(kept, what)
		case inherited[what]:
			maybe = append(maybe, what)
		}
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if slices.Contains(specEnvNames, e.Name) && !slices.ContainsFunc(app.Spec.Env, func(w corev1.EnvVar) bool { return w.Name == e.Name }) {
				sortOut("env var " + e.Name)
			}
		}
	}
	for k := range dep.Spec.Template.Labels {
		if _, want := app.Spec.PodLabels[k]; slices.Contains(specLabelNames, k) && !want {
			sortOut("pod label " + k)
		}
	}
	ready := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady)
	var managers []string
	for _, e := range dep.ManagedFields {
		if e.Manager != webappv2.FieldManager && e.Manager != "kube-controller-manager" && ready != nil && strings.Contains(ready.Message, e.Manager) {
			managers = append(managers, e.Manager)
		}
	}
	switch {
	case len(kept) > 0 && (ready.Reason != ReasonFieldsRetained || len(managers) == 0):
		s.fail("invariant 5 (every WebApp converges or says why): the Deployment of WebApp %s keeps %s, which its spec no longer asks for "+
			"(another field manager co-owns it), but Ready=%s %s %q does not say so (want False %s naming the manager)",
			a.name, strings.Join(kept, ", "), ready.Status, ready.Reason, ready.Message, ReasonFieldsRetained)
	case len(kept)+len(maybe) == 0 && ready.Reason == ReasonFieldsRetained:
		s.fail("invariant 5: WebApp %s says %s (%q) but its Deployment keeps nothing the spec no longer asks for", a.name, ready.Reason, ready.Message)
	}
}

// askedFor is every env var and pod label of the test's vocabulary that a generation of the WebApp uid asked for,
// as checkRetained names them.
func (s *seq) askedFor(uid types.UID) map[string]bool {
	out := map[string]bool{}
	for _, spec := range s.specs[uid] {
		for _, e := range spec.Env {
			out["env var "+e.Name] = true
		}
		for k := range spec.PodLabels {
			out["pod label "+k] = true
		}
	}
	return out
}

// zeroWrites: invariant 6. Since since, the operator sent no write (refused ones included) and recorded no
// event, except one Deployment apply with its ApplyFailed event for each WebApp in retried.
func (s *seq) zeroWrites(when string, since time.Time, retried map[string]bool) {
	var bad []string
	tried := map[string]bool{}
	for _, w := range s.writes.take() {
		// A refused version is the canary's too: its Deployment is tried once more as well.
		name := strings.TrimSuffix(path.Base(w), "-canary")
		switch {
		case strings.Contains(w, "/events"):
			// Judged by the events themselves, below: one recorded before may still be on its way.
		case retried[name] && strings.HasPrefix(w, "PATCH /apis/apps/v1/") && !tried[name]:
			tried[name] = true
		default:
			bad = append(bad, w)
		}
	}
	events := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), events, client.InNamespace(s.ns)); err != nil {
		s.fail("listing events: %v", err)
	}
	for _, e := range events.Items {
		last := e.EventTime.Time
		if e.Series != nil {
			last = e.Series.LastObservedTime.Time
		}
		if last.Before(since) || (retried[e.Regarding.Name] && e.Reason == "ApplyFailed") {
			continue
		}
		bad = append(bad, fmt.Sprintf("event %s %s: %s", e.Regarding.Name, e.Reason, e.Note))
	}
	if len(bad) > 0 {
		s.fail("invariant 6 (zero writes at rest): %s the operator sent %d writes: %q", when, len(bad), bad)
	}
}

// reporter is the test, with a failure of Eventually, Consistently or any helper reported as a violation:
// with the seed, the replay and the objects.
type reporter struct {
	testing.TB
	s *seq
}

func (r reporter) Fatalf(format string, args ...any) { r.Helper(); r.s.fail(format, args...) }
func (r reporter) Fatal(args ...any)                 { r.Helper(); r.s.fail("%s", fmt.Sprint(args...)) }

func (s *seq) reporting() testing.TB { return reporter{TB: s.t, s: s} }

// fail ends the sequence with msg, the seed, every step so far as commands to replay, and the objects now; the
// replay is also written to a file.
func (s *seq) fail(format string, args ...any) {
	s.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, sequence %d: %s\n\n", s.seed, s.index, fmt.Sprintf(format, args...))
	fmt.Fprintf(&b, "To run the same draws again: WEBAPP_ACTIONS_SEED=%d go test -count=1 -v ./test/actions/ (sequence %d; timing may differ).\n", s.seed, s.index)
	fmt.Fprintf(&b, "The steps so far, as commands (the operator runs with --namespace=%s --requeue-after=%v):\n\n", s.ns, requeue)
	fmt.Fprintf(&b, "kubectl create namespace %s\n", s.ns)
	for _, st := range s.steps {
		fmt.Fprintf(&b, "\n# step %d: %s\n", st.n, st.what)
		for _, c := range st.cmds {
			fmt.Fprintln(&b, c)
		}
	}
	fmt.Fprintf(&b, "\nThe objects now:\n%s", s.dump())
	file := filepath.Join(workDir, fmt.Sprintf("seed-%d-sequence-%d.txt", s.seed, s.index))
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err == nil {
		fmt.Fprintf(&b, "\n(all of this is also in %s)\n", file)
	}
	s.t.Fatal(b.String())
}

// dump is every WebApp and child of the namespace (the markers aside) as YAML.
func (s *seq) dump() string {
	var b strings.Builder
	for _, k := range append([]kind{webAppKind, controllerRevisionKind}, childKinds...) {
		list, err := dyn.Resource(k.gvr).Namespace(s.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "# listing %s: %v\n", k.name, err)
			continue
		}
		for _, u := range list.Items {
			if u.GetName() != markerName {
				fmt.Fprintf(&b, "---\n%s", toYAML(u.Object))
			}
		}
	}
	return b.String()
}

func toYAML(o any) string {
	data, err := yaml.Marshal(o)
	if err != nil {
		return fmt.Sprintf("(cannot print: %v)", err)
	}
	return string(data)
}

// deploymentState is what a failed convergence needs to be read: the Deployment's generation, what its controller
// observed, its status, and who last wrote which part of it.
func (s *seq) deploymentState(name string) string {
	u := s.get(deploymentKind, name)
	if u == nil {
		return "(no Deployment " + name + ")"
	}
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	var managers []string
	for _, m := range u.GetManagedFields() {
		managers = append(managers, fmt.Sprintf("%s %s %s at %v", m.Manager, m.Operation, m.Subresource, m.Time))
	}
	replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return fmt.Sprintf("Deployment %s: generation %d, spec.replicas %d, resourceVersion %s; managers: %s; the operator's last writes: %s; status:\n%s",
		name, u.GetGeneration(), replicas, u.GetResourceVersion(), strings.Join(managers, "; "), strings.Join(s.writes.last(8), ", "), toYAML(status))
}
