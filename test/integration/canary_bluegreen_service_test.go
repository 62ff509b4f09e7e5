package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/checks"
	"github.com/example/webapp-operator/test/testutil"
)

// serviceSelects waits until Service name of ns selects want's pods of WebApp web: "stable" (the WebApp's own) or
// "canary" (the canary Deployment's), and nothing else.
func serviceSelects(t *testing.T, ns, name, want string) {
	t.Helper()
	sel := map[string]string{webappv2.LabelName: webappv2.AppName, webappv2.LabelInstance: "web"}
	if want == "canary" {
		sel = map[string]string{webappv2.LabelName: webappv2.AppName, webappv2.LabelCanaryOf: "web"}
	}
	testutil.Eventually(t, 30*time.Second, "Service "+name+" selects the "+want+" pods", func(ctx context.Context) error {
		svc := &corev1.Service{}
		if err := get(ctx, ns, name, svc); err != nil {
			return err
		}
		if !maps.Equal(svc.Spec.Selector, sel) {
			return fmt.Errorf("selector %v, want %v", svc.Spec.Selector, sel)
		}
		return nil
	})
}

// switchedTo sets WebApp web's image to image and takes its blue/green (without a gate) to the switch: the new
// version's pods marked available, all the traffic on them by the Service's selector. It returns the WebApp then.
func switchedTo(t *testing.T, ns, image string) *webappv2.WebApp {
	t.Helper()
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = image })
	canaryPhase(t, ns, "web", "Canary/0/0")
	testutil.Eventually(t, wait10s, "the canary Deployment", func(ctx context.Context) error { return get(ctx, ns, "web-canary", &appsv1.Deployment{}) })
	markAvailable(t, ns, "web-canary")
	switched := canaryPhase(t, ns, "web", "Canary/1/100")
	serviceSelects(t, ns, "web", "canary")
	return switched
}

// stableWeb creates WebApp web in ns (shop:1, two pods, port http 8080) with the canary strategy c, and waits until
// its Deployment is available and its canary Stable.
func stableWeb(t *testing.T, ns string, c *webappv2.CanarySpec) {
	t.Helper()
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](2), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		Rollout: webappv2.RolloutSpec{Canary: c},
	}}
	if err := k8s.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web")
	markAvailable(t, ns, "web")
	canaryPhase(t, ns, "web", "Stable/0/0")
}

// selectsCanaryNow says whether WebApp web's Service in ns selects its canary's pods now.
func selectsCanaryNow(ctx context.Context, ns string) (bool, error) {
	svc := &corev1.Service{}
	if err := get(ctx, ns, "web", svc); err != nil {
		return false, err
	}
	return svc.Spec.Selector[webappv2.LabelCanaryOf] == "web", nil
}

// TestBlueGreenThroughTheService walks a blue/green without a Gateway on the real API server (no route: the
// WebApp's Service is the switch), the Deployment controller's part played by the test. The preview runs at full
// size behind its own Service, with pods the WebApp's Service never selects; promoted by a person, the Service's
// selector moves to the new version's pods at once; aborted, it moves back. The next version is promoted all the
// way: the stable Deployment rolls while the Service selects the new version's pods, and the selector comes back
// only once it has rolled. A third version's strategy taken out mid-switch sends the traffic back at once and its
// pods retire first; a fourth's Orphan deletion mid-switch puts the selector back before the canary goes. At each
// hold a fresh operator sends no write.
func TestBlueGreenThroughTheService(t *testing.T) {
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	ctx := context.Background()
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](3), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		DeletionPolicy: webappv2.DeletionPolicyOrphan,
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{
			Gate: &webappv2.CanaryGate{}, KeepSeconds: 3600,
		}}},
	}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web")
	markAvailable(t, ns, "web")
	canaryPhase(t, ns, "web", "Stable/0/0")
	serviceSelects(t, ns, "web", "stable")

	// The preview: the new version at full size behind its own Service, none of its pods the WebApp's Service's.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	canaryDep := &appsv1.Deployment{}
	testutil.Eventually(t, wait10s, "the new version at full size", func(ctx context.Context) error {
		if err := get(ctx, ns, "web-canary", canaryDep); err != nil {
			return err
		}
		if n := ptr.Deref(canaryDep.Spec.Replicas, 0); n != 3 {
			return fmt.Errorf("%d pods of the new version, want 3", n)
		}
		return nil
	})
	if _, ok := canaryDep.Spec.Template.Labels[webappv2.LabelInstance]; ok {
		t.Errorf("the preview's pods carry the instance label: the WebApp's Service would select them: %v", canaryDep.Spec.Template.Labels)
	}
	serviceSelects(t, ns, "web-canary", "canary")
	markAvailable(t, ns, "web-canary")
	held := status(t, ns, "held at the switch's gate", func(c *webappv2.CanaryStatus) bool { return c.Step == 0 && c.GateSince != nil })
	serviceSelects(t, ns, "web", "stable")
	if ready := meta.FindStatusCondition(held.Status.Conditions, webappv2.ConditionReady); ready == nil ||
		!strings.Contains(ready.Message, "Blue/green preview of revision "+held.Status.Canary.CanaryRevision+" at full size, with none of the production traffic") {
		t.Errorf("Ready does not say the new version is previewed: %+v", ready)
	}
	op = restartCostsNoWrites(t, op, ns)

	// Promoted: the Service selects the new version's pods at once, the version before kept at full size.
	revision := held.Status.Canary.CanaryRevision
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations = map[string]string{webappv2.AnnotationAction: canary.PromoteStep(revision, 0)}
	})
	switchedApp := canaryPhase(t, ns, "web", "Canary/1/100")
	serviceSelects(t, ns, "web", "canary")
	// No warm-up: the Service switched in the reconcile that started the step (the proxies learn the pods with the
	// selector), by the API server's clock.
	svc := &corev1.Service{}
	if err := get(ctx, ns, "web", svc); err != nil {
		t.Fatal(err)
	}
	for _, e := range svc.ManagedFields {
		if e.Manager == webappv2.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Time != nil {
			if d := e.Time.Sub(switchedApp.Status.Canary.StepStartedAt.Time); d >= canary.Warmup {
				t.Errorf("the Service switched %v after the switch's step started: a warm-up a Service needs none of", d)
			}
		}
	}
	if code, out, errOut := kubectlWebApp(t, "-n", ns, "explain", "web"); code != 0 || !strings.Contains(out, "since the blue/green switch (Service web selects its pods, without a Gateway)") {
		t.Errorf("explain does not say the Service switched: exit %d, %s%s", code, out, errOut)
	}
	stable := &appsv1.Deployment{}
	if err := get(ctx, ns, "web", stable); err != nil || stable.Spec.Template.Spec.Containers[0].Image != "shop:1" || ptr.Deref(stable.Spec.Replicas, 0) != 3 {
		t.Errorf("the version before is not kept at full size: %v", err)
	}
	op = restartCostsNoWrites(t, op, ns)

	// Aborted within the keep: the Service back on the stable pods at once, the new version gone.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations[webappv2.AnnotationAction] = canary.Abort(revision)
	})
	canaryPhase(t, ns, "web", "RolledBack/1/0")
	serviceSelects(t, ns, "web", "stable")
	back := time.Now()
	gone(t, ns, "web-canary", &appsv1.Deployment{})
	if d := time.Since(back); d < canary.Retire-2*time.Second {
		// (Seen back at most a poll after it was: the pods must outlive it by canary.Retire, less that poll.)
		t.Errorf("the aborted version's pods went %v after the Service left them, want about %v", d, canary.Retire)
	}
	gone(t, ns, "web-canary", &corev1.Service{})
	op = restartCostsNoWrites(t, op, ns)

	// The next version, no gate and a short keep: switched once ready, then promoted while the Service selects it;
	// the selector comes back only once the stable Deployment has rolled to it.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Spec.Image = "shop:3"
		a.Spec.Rollout.Canary.BlueGreen = &webappv2.BlueGreenSpec{KeepSeconds: 1}
	})
	canaryPhase(t, ns, "web", "Canary/0/0")
	testutil.Eventually(t, wait10s, "the canary Deployment", func(ctx context.Context) error { return get(ctx, ns, "web-canary", &appsv1.Deployment{}) })
	markAvailable(t, ns, "web-canary")
	canaryPhase(t, ns, "web", "Promoting/2/100")
	serviceSelects(t, ns, "web", "canary")
	stableImage(t, ns, "web", "shop:3", "promoted behind the Service's switch")
	if toCanary, err := selectsCanaryNow(ctx, ns); err != nil || !toCanary {
		t.Errorf("the Service left the new version's pods before the stable Deployment rolled: %v %v", toCanary, err)
	}
	markAvailable(t, ns, "web")
	serviceSelects(t, ns, "web", "stable")
	canaryPhase(t, ns, "web", "Stable/0/0")
	gone(t, ns, "web-canary", &appsv1.Deployment{})
	op = restartCostsNoWrites(t, op, ns)

	// A third new version, its strategy taken out while switched: the traffic back on the Service's stable pods at
	// once, its pods retiring first (canary.Retire), then gone.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Spec.Rollout.Canary.BlueGreen = &webappv2.BlueGreenSpec{KeepSeconds: 3600}
	})
	switchedTo(t, ns, "shop:4")
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Rollout.Canary = nil })
	left := time.Now()
	serviceSelects(t, ns, "web", "stable")
	status(t, ns, "the switched version retiring", func(c *webappv2.CanaryStatus) bool { return c.RetiringRevision != "" })
	if err := get(ctx, ns, "web-canary", &appsv1.Deployment{}); err != nil {
		t.Errorf("the switched version's pods went with its traffic, not after it: %v", err)
	}
	gone(t, ns, "web-canary", &appsv1.Deployment{})
	if d := time.Since(left); d < canary.Retire-time.Second {
		t.Errorf("the switched version's pods went %v after the strategy was taken out, want at least %v", d, canary.Retire)
	}
	testutil.Eventually(t, wait10s, "status.canary gone", func(ctx context.Context) error {
		a := &webappv2.WebApp{}
		if err := get(ctx, ns, "web", a); err != nil {
			return err
		}
		if a.Status.Canary != nil {
			return fmt.Errorf("status.canary %+v", a.Status.Canary)
		}
		return nil
	})
	markAvailable(t, ns, "web")
	restartCostsNoWrites(t, op, ns)

	// A fourth new version switched, then the WebApp deleted with the Orphan policy: the Service's selector back on the
	// stable pods first, the canary deleted canary.Retire later, and the Service released on the stable pods.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Spec.Rollout.Canary = &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{KeepSeconds: 3600}}
	})
	canaryPhase(t, ns, "web", "Stable/0/0")
	switchedTo(t, ns, "shop:5")
	deleted := time.Now()
	if err := k8s.Delete(ctx, &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	// Watched every 50 ms: when the Service left the canary, when the canary went, when the WebApp went.
	var svcLeft, canaryGone, appGone time.Duration
	for appGone == 0 {
		if time.Since(deleted) > 60*time.Second {
			t.Fatalf("after 60 s: the Service left the canary at %v, the canary gone at %v, the WebApp still there", svcLeft, canaryGone)
		}
		since := time.Since(deleted)
		if toCanary, err := selectsCanaryNow(ctx, ns); err == nil && !toCanary && svcLeft == 0 {
			svcLeft = since
		}
		if err := get(ctx, ns, "web-canary", &appsv1.Deployment{}); apierrors.IsNotFound(err) && canaryGone == 0 {
			canaryGone = since
			if svcLeft == 0 {
				t.Errorf("the canary Deployment went while the Service still selected its pods")
			}
		}
		if err := get(ctx, ns, "web", &webappv2.WebApp{}); apierrors.IsNotFound(err) {
			appGone = since
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the Service left the canary %v after the deletion, the canary went at %v, the WebApp at %v", svcLeft.Round(time.Millisecond), canaryGone.Round(time.Millisecond), appGone.Round(time.Millisecond))
	switch {
	case canaryGone == 0 || canaryGone > appGone:
		t.Errorf("the canary Deployment went at %v, the WebApp at %v", canaryGone, appGone)
	case canaryGone-svcLeft < 9500*time.Millisecond:
		t.Errorf("the canary went %v after the Service left it: the proxies are given %v to follow", canaryGone-svcLeft, canary.Retire)
	}
	svc = &corev1.Service{}
	if err := get(ctx, ns, "web", svc); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{webappv2.LabelName: webappv2.AppName, webappv2.LabelInstance: "web"}; !maps.Equal(svc.Spec.Selector, want) || len(svc.OwnerReferences) != 0 {
		t.Errorf("the Service left behind: selector %v, owners %v; want %v, none", svc.Spec.Selector, svc.OwnerReferences, want)
	}
}

// A blue/green without a Gateway whose switch back is refused (an admission policy on the Service) keeps its
// canary's pods while the Service still selects them, whatever the decision (an abort, the strategy taken out),
// Ready saying both; once the write succeeds, they stay canary.Retire more (the proxies follow the selector first),
// then go.
func TestACanaryUnderTrafficIsKeptUntilTheSwitchIsWritten(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	stableWeb(t, ns, &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{KeepSeconds: 3600}})

	// Aborted: the decision rolls back, but the Service's switch back is refused.
	switched := switchedTo(t, ns, "shop:2")
	keptUntilTheSwitchIsWritten(t, ns, "abort", func() {
		update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
			a.Annotations = map[string]string{webappv2.AnnotationAction: canary.Abort(switched.Status.Canary.CanaryRevision)}
		})
		canaryPhase(t, ns, "web", "RolledBack/1/0")
	})

	// The strategy taken out mid-switch: the pods are to retire, but the switch back is refused.
	switchedTo(t, ns, "shop:3")
	keptUntilTheSwitchIsWritten(t, ns, "strategy", func() {
		update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Rollout.Canary = nil })
	})
}

// keptUntilTheSwitchIsWritten freezes WebApp web's Service while it selects the canary's pods (an admission policy
// refusing any update that does not), runs act (which decides that the traffic leaves the canary), and checks that
// the canary's Deployment stays while the Service selects its pods, Ready saying both, and canary.Retire after the
// policy is lifted and the switch back written; then that it goes.
func keptUntilTheSwitchIsWritten(t *testing.T, ns, name string, act func()) {
	t.Helper()
	ctx := context.Background()
	binding := denyingPolicy(t, ns, "keep-the-switch-"+name+"-"+ns, admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
	}, "has(object.spec.selector) && 'webapp.example.com/canary-of' in object.spec.selector", "the switch is frozen")
	switchBack := func(ctx context.Context) error {
		svc := &corev1.Service{}
		if err := get(ctx, ns, "web", svc); err != nil {
			return err
		}
		svc.Spec.Selector = map[string]string{webappv2.LabelName: webappv2.AppName, webappv2.LabelInstance: "web"}
		return k8s.Update(ctx, svc, client.DryRunAll)
	}
	testutil.Eventually(t, wait10s, "policy enforced", func(ctx context.Context) error {
		if switchBack(ctx) == nil {
			return errors.New("the switch back still accepted")
		}
		return nil
	})

	act()
	testutil.Consistently(t, canary.Retire+5*time.Second, "the canary's Deployment kept while the Service selects its pods", func(ctx context.Context) error {
		switch toCanary, err := selectsCanaryNow(ctx, ns); {
		case err != nil:
			return err
		case !toCanary:
			return errors.New("the Service's switch back was not refused")
		}
		return get(ctx, ns, "web-canary", &appsv1.Deployment{})
	})
	held := &webappv2.WebApp{}
	if err := get(ctx, ns, "web", held); err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(held.Status.Conditions, webappv2.ConditionReady); ready == nil || ready.Status != metav1.ConditionFalse ||
		!strings.Contains(ready.Message, "the switch is frozen") || !strings.Contains(ready.Message, "Deployment "+ns+"/web-canary is kept as it is: the WebApp's Service or route, as last applied, still sends the canary's pods traffic") {
		t.Errorf("%s: Ready does not say the Service's write is refused and the canary kept: %+v", name, ready)
	}

	// The policy gone (and the Service changed since, by another client: a refused write is tried again then, or
	// RefusedRetryAfter later): the selector back on the stable pods, then the canary's pods go.
	if err := k8s.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait10s, "the policy lifted", switchBack)
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{"round":%q}}}`, name)
	if err := k8s.Patch(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("kubectl-label")); err != nil {
		t.Fatal(err)
	}
	serviceSelects(t, ns, "web", "stable")
	// The pods stay canary.Retire after that write, however late it came (the proxies follow the selector first).
	testutil.Consistently(t, canary.Retire-2*time.Second, "the canary's Deployment kept after the Service's late switch back", func(ctx context.Context) error {
		return get(ctx, ns, "web-canary", &appsv1.Deployment{})
	})
	gone(t, ns, "web-canary", &appsv1.Deployment{})
}

// TestStepsTurnedIntoABlueGreenStartAtItsPreview: a canary at its second step whose steps are turned into a
// blue/green (without a Gateway) starts again at the blue/green's preview, held at its gate with none of the
// production traffic, rather than switch at once (the blue/green's switch is its second step too). The status says
// the kind of strategy the canary runs.
func TestStepsTurnedIntoABlueGreenStartAtItsPreview(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	stableWeb(t, ns, &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 20, PauseSeconds: 1}, {Weight: 50, PauseSeconds: 3600}}})
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	testutil.Eventually(t, wait10s, "the canary Deployment", func(ctx context.Context) error { return get(ctx, ns, "web-canary", &appsv1.Deployment{}) })
	markAvailable(t, ns, "web-canary")
	// The second step's count of pods, then its weight.
	canaryPhase(t, ns, "web", "Canary/1/20")
	markAvailable(t, ns, "web-canary")
	second := canaryPhase(t, ns, "web", "Canary/1/50")
	if got := second.Status.Canary.Strategy; got != canary.KindSteps {
		t.Errorf("status.canary.strategy %q, want %q", got, canary.KindSteps)
	}

	// Turned into a blue/green with a gate: the preview at full size, behind its own Service, the switch held.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Spec.Rollout.Canary.Steps = nil
		a.Spec.Rollout.Canary.BlueGreen = &webappv2.BlueGreenSpec{Gate: &webappv2.CanaryGate{}, KeepSeconds: 3600}
	})
	canaryPhase(t, ns, "web", "Canary/0/0")
	testutil.Eventually(t, wait10s, "the new version at full size", func(ctx context.Context) error {
		dep := &appsv1.Deployment{}
		if err := get(ctx, ns, "web-canary", dep); err != nil {
			return err
		}
		if n := ptr.Deref(dep.Spec.Replicas, 0); n != 2 {
			return fmt.Errorf("%d pods of the new version, want 2", n)
		}
		return nil
	})
	markAvailable(t, ns, "web-canary")
	held := status(t, ns, "held at the preview's gate", func(c *webappv2.CanaryStatus) bool { return c.Step == 0 && c.GateSince != nil })
	if got := held.Status.Canary.Strategy; got != canary.KindBlueGreen {
		t.Errorf("status.canary.strategy %q, want %q", got, canary.KindBlueGreen)
	}
	testutil.Consistently(t, 3*time.Second, "the switch held at the preview's gate", func(ctx context.Context) error {
		switch toCanary, err := selectsCanaryNow(ctx, ns); {
		case err != nil:
			return err
		case toCanary:
			return errors.New("the Service selects the canary's pods before the gate")
		}
		return nil
	})

	// Promoted by a person: the switch.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations = map[string]string{webappv2.AnnotationAction: canary.PromoteStep(held.Status.Canary.CanaryRevision, 0)}
	})
	canaryPhase(t, ns, "web", "Canary/1/100")
	serviceSelects(t, ns, "web", "canary")
}

// TestAPreviewHostBehindAnIngress: a blue/green behind an Ingress with a preview host previews the new version
// through a second Ingress, web-canary, of expose's class and paths, to the canary's Service alone (with expose's
// TLS Secret for the host); the WebApp's own Ingress never changes. It exists from the preview until the promotion
// is complete, goes with a rollback, and a fresh operator sends no write while it is held at the gate.
func TestAPreviewHostBehindAnIngress(t *testing.T) {
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	ctx := context.Background()
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](2), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		Expose: &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Paths: []webappv2.PathPrefix{"/shop"},
			Ingress: &webappv2.IngressRef{ClassName: "traefik"}, TLS: &webappv2.ExposeTLS{SecretName: "wildcard-tls"}},
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{
			Gate: &webappv2.CanaryGate{}, KeepSeconds: 1, PreviewHost: "preview.shop.example.com",
		}}},
	}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web")
	markAvailable(t, ns, "web")
	canaryPhase(t, ns, "web", "Stable/0/0")
	own := &networkingv1.Ingress{}
	if err := get(ctx, ns, "web", own); err != nil {
		t.Fatal(err)
	}
	if err := get(ctx, ns, "web-canary", &networkingv1.Ingress{}); !apierrors.IsNotFound(err) {
		t.Errorf("a preview Ingress with no release under way: %v", err)
	}

	// The preview: the second Ingress, for the preview host alone, to the canary's Service.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	preview := &networkingv1.Ingress{}
	testutil.Eventually(t, wait10s, "the preview Ingress", func(ctx context.Context) error { return get(ctx, ns, "web-canary", preview) })
	want := networkingv1.IngressSpec{IngressClassName: ptr.To("traefik"),
		TLS: []networkingv1.IngressTLS{{Hosts: []string{"preview.shop.example.com"}, SecretName: "wildcard-tls"}},
		Rules: []networkingv1.IngressRule{{Host: "preview.shop.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/shop", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web-canary", Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}}}}},
	}
	if !equality.Semantic.DeepEqual(preview.Spec, want) {
		t.Errorf("the preview Ingress:\n got %+v\nwant %+v", preview.Spec, want)
	}
	if c := metav1.GetControllerOf(preview); c == nil || c.Name != "web" {
		t.Errorf("the preview Ingress is not the WebApp's: %v", preview.OwnerReferences)
	}
	markAvailable(t, ns, "web-canary")
	held := status(t, ns, "held at the preview's gate", func(c *webappv2.CanaryStatus) bool { return c.Step == 0 && c.GateSince != nil })
	op = restartCostsNoWrites(t, op, ns)

	// Promoted: the switch, the keep, the promotion; the preview Ingress goes once the promotion is complete.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations = map[string]string{webappv2.AnnotationAction: canary.PromoteStep(held.Status.Canary.CanaryRevision, 0)}
	})
	canaryPhase(t, ns, "web", "Promoting/2/100")
	if err := get(ctx, ns, "web-canary", &networkingv1.Ingress{}); err != nil {
		t.Errorf("the preview Ingress went before the promotion was complete: %v", err)
	}
	stableImage(t, ns, "web", "shop:2", "promoted behind the Service's switch")
	markAvailable(t, ns, "web")
	canaryPhase(t, ns, "web", "Stable/0/0")
	gone(t, ns, "web-canary", &networkingv1.Ingress{})

	// The next version aborted at its preview: its preview Ingress goes with it.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:3" })
	testutil.Eventually(t, wait10s, "the next preview Ingress", func(ctx context.Context) error { return get(ctx, ns, "web-canary", &networkingv1.Ingress{}) })
	next := status(t, ns, "the next version previewed", func(c *webappv2.CanaryStatus) bool { return c.Phase == "Canary" && c.CanaryRevision != "" })
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations = map[string]string{webappv2.AnnotationAction: canary.Abort(next.Status.Canary.CanaryRevision)}
	})
	canaryPhase(t, ns, "web", "RolledBack/0/0")
	gone(t, ns, "web-canary", &networkingv1.Ingress{})
	after := &networkingv1.Ingress{}
	if err := get(ctx, ns, "web", after); err != nil || !equality.Semantic.DeepEqual(after.Spec, own.Spec) {
		t.Errorf("the WebApp's own Ingress changed: %v\n got %+v\nwant %+v", err, after.Spec, own.Spec)
	}
	restartCostsNoWrites(t, op, ns)
}

// TestRetireSecondsHoldsTheCanarysPods: spec.rollout.canary.retireSeconds is how long a canary's pods stay after the
// traffic left them: a blue/green without a Gateway aborted after its switch keeps the new version's pods that long
// after the Service's selector came back (longer than the default here), then they go.
func TestRetireSecondsHoldsTheCanarysPods(t *testing.T) {
	const retire = 25 * time.Second
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	stableWeb(t, ns, &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{KeepSeconds: 3600}, RetireSeconds: int32(retire / time.Second)})
	// retired: once the Service's selector is back on the stable pods, the new version's pods stay retireSeconds,
	// then go.
	retired := func(what string) {
		t.Helper()
		serviceSelects(t, ns, "web", "stable")
		back := time.Now()
		testutil.Consistently(t, retire-3*time.Second, what+": the new version's pods kept retireSeconds", func(ctx context.Context) error {
			return get(ctx, ns, "web-canary", &appsv1.Deployment{})
		})
		gone(t, ns, "web-canary", &appsv1.Deployment{})
		if d := time.Since(back); d > retire+10*time.Second {
			t.Errorf("%s: the new version's pods went %v after the Service left them, want about %v", what, d, retire)
		}
	}

	// Aborted in the keep: the selector back at once, the new version's pods kept retireSeconds.
	switched := switchedTo(t, ns, "shop:2")
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations = map[string]string{webappv2.AnnotationAction: canary.Abort(switched.Status.Canary.CanaryRevision)}
	})
	canaryPhase(t, ns, "web", "RolledBack/1/0")
	retired("aborted")

	// The strategy taken out mid-switch: its retireSeconds went with it, but the status kept it.
	switchedTo(t, ns, "shop:3")
	status(t, ns, "retireSeconds kept in the status", func(c *webappv2.CanaryStatus) bool { return c.RetireSeconds == int32(retire/time.Second) })
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Rollout.Canary = nil })
	retired("the strategy taken out")
}

// TestASmallerPreviewIsScaledUpBeforeTheSwitch: a blue/green with previewPercent previews the new version at that
// share of the stable count; promoted, it is scaled to the stable count, and the switch (the Service's selector, or
// the route's weights) waits until every one of its pods is ready, then comes at once. A fresh operator at the gate
// and while it scales up sends no write.
func TestASmallerPreviewIsScaledUpBeforeTheSwitch(t *testing.T) {
	for _, routed := range []bool{false, true} {
		t.Run(map[bool]string{false: "switched by the Service", true: "switched by the route"}[routed], func(t *testing.T) {
			if routed {
				installGatewayAPI(t)
			}
			ns := newNamespace(t)
			op := startOperator(t, ns, time.Second)
			ctx := context.Background()
			app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
				Image: "shop:1", Replicas: ptr.To[int32](8), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
				Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{
					PreviewPercent: 25, Gate: &webappv2.CanaryGate{}, KeepSeconds: 3600,
				}}},
			}}
			if routed {
				app.Spec.Expose = &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}}
			}
			if err := k8s.Create(ctx, app); err != nil {
				t.Fatal(err)
			}
			waitChildren(t, ns, "web")
			markAvailable(t, ns, "web")
			canaryPhase(t, ns, "web", "Stable/0/0")
			// onStable: all the traffic goes to the stable pods now (the Service's selector, or the route's weights).
			onStable := func(ctx context.Context) error {
				if routed {
					got, err := routeRules(ctx, ns, "web")
					if err == nil && got != "[/] web=1" {
						err = fmt.Errorf("the route: %s", got)
					}
					return err
				}
				on, err := selectsCanaryNow(ctx, ns)
				if err == nil && on {
					err = errors.New("the Service selects the new version's pods")
				}
				return err
			}
			countIs := func(want int32, why string) {
				t.Helper()
				testutil.Eventually(t, wait10s, why, func(ctx context.Context) error {
					dep := &appsv1.Deployment{}
					if err := get(ctx, ns, "web-canary", dep); err != nil {
						return err
					}
					if n := ptr.Deref(dep.Spec.Replicas, 0); n != want {
						return fmt.Errorf("%d pods of the new version, want %d", n, want)
					}
					return nil
				})
			}

			// The preview: a quarter of the eight stable pods.
			update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
			countIs(2, "the preview at a quarter of the stable count")
			markAvailable(t, ns, "web-canary")
			held := status(t, ns, "held at the switch's gate", func(c *webappv2.CanaryStatus) bool { return c.Step == 0 && c.GateSince != nil })
			if ready := meta.FindStatusCondition(held.Status.Conditions, webappv2.ConditionReady); ready == nil ||
				!strings.Contains(ready.Message, "Blue/green preview of revision "+held.Status.Canary.CanaryRevision+" at 25% of the stable count") {
				t.Errorf("Ready does not say how large the preview is: %+v", ready)
			}
			if err := onStable(ctx); err != nil {
				t.Errorf("in the preview: %v", err)
			}
			op = restartCostsNoWrites(t, op, ns)

			// Promoted: scaled to the stable count first; no traffic while its pods are not all ready.
			revision := held.Status.Canary.CanaryRevision
			update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
				a.Annotations = map[string]string{webappv2.AnnotationAction: canary.PromoteStep(revision, 0)}
			})
			countIs(8, "the new version scaled to the stable count for the switch")
			scaling := canaryPhase(t, ns, "web", "Canary/1/0")
			if ready := meta.FindStatusCondition(scaling.Status.Conditions, webappv2.ConditionReady); ready == nil ||
				!strings.Contains(ready.Message, "Blue/green switch to revision "+revision+" once its pods are ready at full size") {
				t.Errorf("Ready does not say the switch waits for the pods: %+v", ready)
			}
			// (Two of eight pods are available: the Deployment's status is the preview's.)
			waitResyncs(t, 3, 30*time.Second)
			if err := onStable(ctx); err != nil {
				t.Errorf("before the new version's pods are all ready: %v", err)
			}
			op = restartCostsNoWrites(t, op, ns)

			// Every pod ready: the switch, at once (behind a route, a warm-up after).
			markAvailable(t, ns, "web-canary")
			canaryPhase(t, ns, "web", "Canary/1/100")
			if routed {
				waitRoute(t, ns, "[/] web=0,web-canary=100")
			} else {
				serviceSelects(t, ns, "web", "canary")
			}
			restartCostsNoWrites(t, op, ns)
		})
	}
}

// TestChecksOfABlueGreensPreviewAndKeep: a blue/green's check during Preview (a smoke test) is asked only before
// the switch, one during Keep only after it, on the production traffic: the switch comes on the smoke test alone,
// both evaluations stay in the status, and the keep's check failing switches back, naming it.
func TestChecksOfABlueGreensPreviewAndKeep(t *testing.T) {
	var errorsValue atomic.Value
	errorsValue.Store("0.001")
	var mu sync.Mutex
	var asked []string // check@step, in order
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req checks.CheckRequest
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "want a POST of a CheckRequest", http.StatusBadRequest)
			return
		}
		mu.Lock()
		asked = append(asked, fmt.Sprintf("%s@%d", req.Check, req.Step))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		value := "0"
		if req.Check == "errors" {
			value = errorsValue.Load().(string)
		}
		_, _ = fmt.Fprintf(w, `{"value": %s}`, value)
	}))
	defer hook.Close()
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	stableWeb(t, ns, &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{KeepSeconds: 3600}, CheckIntervalSeconds: 1, Checks: []webappv2.CanaryCheck{
		{Name: "smoke", Webhook: &webappv2.WebhookCheck{URL: hook.URL + "/smoke", TimeoutSeconds: 2}, Max: "0", During: webappv2.DuringPreview},
		{Name: "errors", Webhook: &webappv2.WebhookCheck{URL: hook.URL + "/errors", TimeoutSeconds: 2}, Max: "0.01", During: webappv2.DuringKeep},
	}})
	switchedTo(t, ns, "shop:2")
	app := status(t, ns, "both checks evaluated, each in its part", func(c *webappv2.CanaryStatus) bool {
		return len(c.Checks) == 2 && c.Checks[0].Name == "smoke" && c.Checks[0].Passed && c.Checks[1].Name == "errors" && c.Checks[1].Value == "0.001"
	})
	// (To the second, as the status keeps times: with no pause, both may fall in one.)
	if app.Status.Canary.Checks[1].EvaluatedAt.Before(&app.Status.Canary.Checks[0].EvaluatedAt) {
		t.Errorf("the keep's check evaluated at %s, before the preview's (%s)", app.Status.Canary.Checks[1].EvaluatedAt, app.Status.Canary.Checks[0].EvaluatedAt)
	}
	errorsValue.Store("0.9")
	rolled := canaryPhase(t, ns, "web", "RolledBack/1/0")
	if msg := rolled.Status.Canary.Message; msg != "check errors: 0.9 > 0.01 (failures 1, allowed 0)" {
		t.Errorf("rolled back with %q", msg)
	}
	serviceSelects(t, ns, "web", "stable")
	mu.Lock()
	defer mu.Unlock()
	var smoke, keep int
	for _, a := range asked {
		switch a {
		case "smoke@0":
			smoke++
		case "errors@1":
			keep++
		default:
			t.Errorf("a check asked outside its part: %s (all: %v)", a, asked)
		}
	}
	if smoke == 0 || keep == 0 {
		t.Errorf("smoke asked %d times in the preview, errors %d in the keep: want both (all: %v)", smoke, keep, asked)
	}
}
