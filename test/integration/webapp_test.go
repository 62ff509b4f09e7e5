package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

const wait10s = 10 * time.Second

func createWebApp(t *testing.T, ns, name string, replicas, port int32) *webappv1.WebApp {
	t.Helper()
	app := &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       webappv1.WebAppSpec{Image: "nginx:1.25", Replicas: replicas, Port: port},
	}
	if err := k8s.Create(context.Background(), app); err != nil {
		t.Fatalf("creating WebApp %s: %v", name, err)
	}
	return app
}

func get[T client.Object](ctx context.Context, ns, name string, obj T) error {
	return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
}

// runningWebApp creates a namespace, starts an operator for it (resync period requeue) and a WebApp "web" on
// port 80, and waits for its Deployment and Service.
func runningWebApp(t *testing.T, replicas int32, requeue time.Duration) (string, *webappv1.WebApp) {
	t.Helper()
	ns := newNamespace(t)
	startOperator(t, ns, requeue)
	app := createWebApp(t, ns, "web", replicas, 80)
	waitChildren(t, ns, "web")
	return ns, app
}

// waitChildren waits until the Deployment and Service of the WebApp exist and returns them.
func waitChildren(t *testing.T, ns, name string) (*appsv1.Deployment, *corev1.Service) {
	t.Helper()
	dep, svc := &appsv1.Deployment{}, &corev1.Service{}
	testutil.Eventually(t, wait10s, "children created", func(ctx context.Context) error {
		if err := get(ctx, ns, name, dep); err != nil {
			return err
		}
		return get(ctx, ns, name, svc)
	})
	return dep, svc
}

func TestChildrenAreCreatedAndControlledByTheWebApp(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Minute)
	app := createWebApp(t, ns, "nginx-app", 3, 80)
	dep, svc := waitChildren(t, ns, "nginx-app")

	for _, o := range []client.Object{dep, svc} {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.UID != app.UID || ref.Kind != "WebApp" || ref.APIVersion != "example.com/v1" ||
			ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("%T controller reference = %+v, want the WebApp %s", o, ref, app.UID)
		}
		want := map[string]string{"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": "nginx-app", "app.kubernetes.io/managed-by": "webapp-operator"}
		for k, v := range want {
			if o.GetLabels()[k] != v {
				t.Errorf("%T label %s = %q, want %q", o, k, o.GetLabels()[k], v)
			}
		}
	}
	c := dep.Spec.Template.Spec.Containers
	if *dep.Spec.Replicas != 3 || len(c) != 1 || c[0].Image != "nginx:1.25" || c[0].Ports[0].ContainerPort != 80 {
		t.Errorf("deployment spec = %+v", dep.Spec)
	}
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != 80 || p[0].TargetPort != intstr.FromString("http") || svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service spec = %+v", svc.Spec)
	}

	// Status: the Deployment never becomes available here (no controller-manager), so Ready is False and says why.
	testutil.Eventually(t, wait10s, "status reported", func(ctx context.Context) error {
		if err := get(ctx, ns, "nginx-app", app); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.ObservedGeneration != app.Generation {
			return fmt.Errorf("ready = %+v", ready)
		}
		if app.Status.URL != "http://nginx-app."+ns+".svc:80" || app.Status.ObservedGeneration != app.Generation ||
			app.Status.Selector != "app.kubernetes.io/instance=nginx-app,app.kubernetes.io/name=webapp" {
			return fmt.Errorf("status = %+v", app.Status)
		}
		return nil
	})
}

// ownedLeaves are the leaf field paths that manager owns through Apply on obj (subresource "" or "status").
func ownedLeaves(t *testing.T, obj client.Object, manager, subresource string) []string {
	t.Helper()
	var paths []string
	for _, e := range testutil.AppliedBy(obj.GetManagedFields(), manager, subresource) {
		set := &fieldpath.Set{}
		if err := set.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
			t.Fatalf("decoding managedFields of %s: %v", manager, err)
		}
		set.Leaves().Iterate(func(p fieldpath.Path) { paths = append(paths, p.String()) })
	}
	return slices.Sorted(slices.Values(paths))
}

func TestOurManagerOwnsExactlyTheFieldsItSends(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Minute)
	app := createWebApp(t, ns, "web", 2, 8080)
	dep, svc := waitChildren(t, ns, "web")
	uid := string(app.UID)
	// Leaves only: an owner reference and a label selector are atomic, so their entries are the leaves.
	meta := []string{
		`.metadata.labels.app.kubernetes.io/instance`,
		`.metadata.labels.app.kubernetes.io/managed-by`,
		`.metadata.labels.app.kubernetes.io/name`,
		`.metadata.ownerReferences[uid="` + uid + `"]`,
	}
	port := `.spec.template.spec.containers[name="app"].ports[containerPort=8080,protocol="TCP"]`
	wantDep := slices.Sorted(slices.Values(append(slices.Clone(meta),
		`.spec.progressDeadlineSeconds`,
		`.spec.replicas`,
		`.spec.selector`,
		`.spec.template.metadata.labels.app.kubernetes.io/instance`,
		`.spec.template.metadata.labels.app.kubernetes.io/managed-by`,
		`.spec.template.metadata.labels.app.kubernetes.io/name`,
		`.spec.template.spec.containers[name="app"].image`,
		`.spec.template.spec.containers[name="app"].name`,
		port+`.containerPort`, port+`.name`, port+`.protocol`,
		// The default readiness probe and the restricted Pod Security Standard.
		`.spec.template.spec.containers[name="app"].readinessProbe.tcpSocket.port`,
		`.spec.template.spec.containers[name="app"].securityContext.allowPrivilegeEscalation`,
		`.spec.template.spec.containers[name="app"].securityContext.capabilities.drop`,
		`.spec.template.spec.securityContext.runAsNonRoot`,
		`.spec.template.spec.securityContext.seccompProfile.type`,
	)))
	svcPort := `.spec.ports[port=8080,protocol="TCP"]`
	wantSvc := slices.Sorted(slices.Values(append(slices.Clone(meta),
		svcPort+`.name`, svcPort+`.port`, svcPort+`.protocol`, svcPort+`.targetPort`,
		`.spec.selector`,
		`.spec.type`,
	)))
	wantStatus := []string{
		`.status.conditions[type="Progressing"].lastTransitionTime`,
		`.status.conditions[type="Progressing"].message`,
		`.status.conditions[type="Progressing"].observedGeneration`,
		`.status.conditions[type="Progressing"].reason`,
		`.status.conditions[type="Progressing"].status`,
		`.status.conditions[type="Progressing"].type`,
		`.status.conditions[type="Ready"].lastTransitionTime`,
		`.status.conditions[type="Ready"].message`,
		`.status.conditions[type="Ready"].observedGeneration`,
		`.status.conditions[type="Ready"].reason`,
		`.status.conditions[type="Ready"].status`,
		`.status.conditions[type="Ready"].type`,
		`.status.desiredReplicas`,
		`.status.observedGeneration`,
		`.status.replicasSetBy`,
		`.status.selector`,
		`.status.url`,
	}
	if got := ownedLeaves(t, dep, webappv2.FieldManager, ""); !slices.Equal(got, wantDep) {
		t.Errorf("Deployment fields owned by %s:\n got %q\nwant %q", webappv2.FieldManager, got, wantDep)
	}
	if got := ownedLeaves(t, svc, webappv2.FieldManager, ""); !slices.Equal(got, wantSvc) {
		t.Errorf("Service fields owned by %s:\n got %q\nwant %q", webappv2.FieldManager, got, wantSvc)
	}
	testutil.Eventually(t, wait10s, "status owned through the status subresource", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", app); err != nil {
			return err
		}
		if got := ownedLeaves(t, app, webappv2.FieldManager, "status"); !slices.Equal(got, wantStatus) {
			return fmt.Errorf("WebApp status fields owned by %s:\n got %q\nwant %q", webappv2.FieldManager, got, wantStatus)
		}
		return nil
	})
	// The spec is the user's: we never write it.
	if got := ownedLeaves(t, app, webappv2.FieldManager, ""); len(got) != 0 {
		t.Errorf("%s owns WebApp fields outside status: %q", webappv2.FieldManager, got)
	}
}

// update changes the object with an Update, read afresh and retried until the server takes it (the operator's
// own writes may conflict).
func update[T client.Object](t *testing.T, ns, name string, obj T, change func(T), opts ...client.UpdateOption) {
	t.Helper()
	testutil.Eventually(t, wait10s, fmt.Sprintf("update of %T %s", obj, name), func(ctx context.Context) error {
		if err := get(ctx, ns, name, obj); err != nil {
			return err
		}
		change(obj)
		return k8s.Update(ctx, obj, opts...)
	})
}

// intrude changes obj with an Update under another field manager, the way `kubectl edit` or a script would.
func intrude[T client.Object](t *testing.T, ns, name string, obj T, change func(T)) {
	t.Helper()
	update(t, ns, name, obj, change, client.FieldOwner("intruder"))
}

// waitReplicas waits until the Deployment of the WebApp asks for want replicas and returns it.
func waitReplicas(t *testing.T, ns, name string, want int32) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	testutil.Eventually(t, wait10s, fmt.Sprintf("deployment replicas %d", want), func(ctx context.Context) error {
		if err := get(ctx, ns, name, d); err != nil {
			return err
		}
		if *d.Spec.Replicas != want {
			return fmt.Errorf("replicas %d", *d.Spec.Replicas)
		}
		return nil
	})
	return d
}

// child is a kind of child in a drift table: how to make an empty one, and whether one is as we want it.
type child struct {
	new func() client.Object
	ok  func(client.Object) error
}

// changeOf adapts a change of a typed child to a drift table.
func changeOf[T client.Object](change func(T)) func(client.Object) {
	return func(o client.Object) { change(o.(T)) }
}

func TestDriftOnEveryOwnedFieldIsRepaired(t *testing.T) {
	ns, _ := runningWebApp(t, 3, time.Minute)

	depOK := func(o client.Object) error {
		d := o.(*appsv1.Deployment)
		c := d.Spec.Template.Spec.Containers[0]
		switch {
		case *d.Spec.Replicas != 3:
			return fmt.Errorf("replicas %d", *d.Spec.Replicas)
		case c.Image != "nginx:1.25":
			return fmt.Errorf("image %s", c.Image)
		case !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" && p.ContainerPort == 80 }):
			return fmt.Errorf("ports %+v", c.Ports)
		case d.Labels["app.kubernetes.io/instance"] != "web" || d.Labels["app.kubernetes.io/managed-by"] != "webapp-operator":
			return fmt.Errorf("labels %v", d.Labels)
		case d.Spec.Template.Labels["app.kubernetes.io/managed-by"] != "webapp-operator":
			return fmt.Errorf("template labels %v", d.Spec.Template.Labels)
		}
		return nil
	}
	svcOK := func(o client.Object) error {
		s := o.(*corev1.Service)
		switch {
		case len(s.Spec.Selector) != 2 || s.Spec.Selector["app.kubernetes.io/instance"] != "web":
			return fmt.Errorf("selector %v", s.Spec.Selector)
		case !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool {
			return p.Name == "http" && p.Port == 80 && p.TargetPort == intstr.FromString("http")
		}):
			return fmt.Errorf("ports %+v", s.Spec.Ports)
		case s.Labels["app.kubernetes.io/managed-by"] != "webapp-operator":
			return fmt.Errorf("labels %v", s.Labels)
		}
		return nil
	}
	deployment := child{func() client.Object { return &appsv1.Deployment{} }, depOK}
	service := child{func() client.Object { return &corev1.Service{} }, svcOK}
	cases := []struct {
		name   string
		child  child
		change func(client.Object)
	}{
		{"deployment replicas", deployment, changeOf(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(int32(7)) })},
		{"deployment image", deployment, changeOf(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "busybox" })},
		{"deployment container port removed", deployment, changeOf(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Ports = nil })},
		{"deployment label changed", deployment, changeOf(func(d *appsv1.Deployment) { d.Labels["app.kubernetes.io/instance"] = "other" })},
		// Without the managed-by label the object leaves the operator's cache: it must still be put back.
		{"deployment managed-by label removed", deployment, changeOf(func(d *appsv1.Deployment) { delete(d.Labels, "app.kubernetes.io/managed-by") })},
		// (A selector label cannot be changed on the template: the server refuses a template the selector misses.)
		{"deployment pod template label changed", deployment, changeOf(func(d *appsv1.Deployment) { d.Spec.Template.Labels["app.kubernetes.io/managed-by"] = "other" })},
		{"service selector", service, changeOf(func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "other"} })},
		{"service ports replaced", service, changeOf(func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "web", Port: 9090, TargetPort: intstr.FromInt32(9090), Protocol: corev1.ProtocolTCP}}
		})},
		{"service label removed", service, changeOf(func(s *corev1.Service) { delete(s.Labels, "app.kubernetes.io/managed-by") })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			intrude(t, ns, "web", tc.child.new(), tc.change)
			testutil.Eventually(t, wait10s, "repaired", func(ctx context.Context) error {
				o := tc.child.new()
				if err := get(ctx, ns, "web", o); err != nil {
					return err
				}
				return tc.child.ok(o)
			})
		})
	}
	t.Run("deployment deleted", func(t *testing.T) {
		d := &appsv1.Deployment{}
		if err := get(context.Background(), ns, "web", d); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Delete(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, wait10s, "deployment recreated", func(ctx context.Context) error {
			n := &appsv1.Deployment{}
			if err := get(ctx, ns, "web", n); err != nil {
				return err
			}
			if n.UID == d.UID {
				return fmt.Errorf("still the old deployment")
			}
			return depOK(n)
		})
	})
}

func TestOtherManagersFieldsArePreserved(t *testing.T) {
	ns, app := runningWebApp(t, 2, time.Minute)
	ctx := context.Background()

	// A sidecar injector, say, applies an annotation, a label and an env var on our container.
	other := appsv1ac.Deployment("web", ns).
		WithAnnotations(map[string]string{"team": "payments"}).
		WithLabels(map[string]string{"cost-center": "42"}).
		WithSpec(appsv1ac.DeploymentSpec().WithTemplate(corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("app").WithEnv(corev1ac.EnvVar().WithName("INJECTED").WithValue("yes"))))))
	if err := k8s.Apply(ctx, other, client.FieldOwner("injector")); err != nil {
		t.Fatal(err)
	}
	// A spec change makes the operator apply the Deployment again.
	update(t, ns, "web", app, func(app *webappv1.WebApp) { app.Spec.Image = "nginx:1.27" })
	testutil.Eventually(t, wait10s, "new image applied, other manager's fields kept", func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := get(ctx, ns, "web", d); err != nil {
			return err
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != "nginx:1.27" {
			return fmt.Errorf("image %s", c.Image)
		}
		if d.Annotations["team"] != "payments" || d.Labels["cost-center"] != "42" {
			return fmt.Errorf("annotations %v labels %v", d.Annotations, d.Labels)
		}
		if len(c.Env) != 1 || c.Env[0].Name != "INJECTED" {
			return fmt.Errorf("env %+v", c.Env)
		}
		if got := ownedLeaves(t, d, "injector", ""); !slices.Contains(got, `.spec.template.spec.containers[name="app"].env[name="INJECTED"].value`) {
			return fmt.Errorf("injector owns %q", got)
		}
		return nil
	})
}

func TestConflictWithAnotherApplyManagerIsVisibleAndResolvedByForce(t *testing.T) {
	ns, _ := runningWebApp(t, 3, time.Minute)
	ctx := context.Background()

	scale := appsv1ac.Deployment("web", ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(7))
	// Without force the server refuses, naming the manager that owns the field.
	err := k8s.Apply(ctx, scale, client.FieldOwner("rival"))
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), webappv2.FieldManager) || !strings.Contains(err.Error(), ".spec.replicas") {
		t.Fatalf("apply without force: err = %v, want a conflict over .spec.replicas with %s", err, webappv2.FieldManager)
	}
	// With force the rival takes the field; the operator forces it back and owns it again.
	if err := k8s.Apply(ctx, scale, client.FieldOwner("rival"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	// Only the operator sets 3: the Deployment that shows it is the one its forced apply wrote.
	d := waitReplicas(t, ns, "web", 3)
	if !slices.Contains(ownedLeaves(t, d, webappv2.FieldManager, ""), ".spec.replicas") {
		t.Errorf("%s does not own .spec.replicas", webappv2.FieldManager)
	}
	if slices.Contains(ownedLeaves(t, d, "rival", ""), ".spec.replicas") {
		t.Errorf("rival still owns .spec.replicas")
	}
}

func TestInvalidWebAppsAreRefusedAndNothingIsStored(t *testing.T) {
	ns := newNamespace(t)
	spec := func(fields map[string]any) map[string]any {
		s := map[string]any{"image": "nginx:1.25", "replicas": int64(1), "port": int64(80)}
		for k, v := range fields {
			if v == nil {
				delete(s, k)
			} else {
				s[k] = v
			}
		}
		return s
	}
	long := strings.Repeat("a", 64)
	cases := []struct {
		name, objName string
		spec          map[string]any
		want          string
	}{
		{"replicas 0", "r0", spec(map[string]any{"replicas": int64(0)}), "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"},
		{"replicas 11", "r11", spec(map[string]any{"replicas": int64(11)}), "spec.replicas in body should be less than or equal to 10"},
		{"port 0", "p0", spec(map[string]any{"port": int64(0)}), "spec.port in body should be greater than or equal to 1"},
		{"port 70000", "p70000", spec(map[string]any{"port": int64(70000)}), "spec.port in body should be less than or equal to 65535"},
		{"image missing", "noimage", spec(map[string]any{"image": nil}), "spec.image: Required value"},
		{"image empty", "emptyimage", spec(map[string]any{"image": ""}), "spec.image in body should be at least 1 chars long"},
		{"image blank", "blankimage", spec(map[string]any{"image": "  "}), "spec.image in body should match"},
		{"image with space", "spaceimage", spec(map[string]any{"image": "nginx 1.25"}), "spec.image in body should match"},
		{"name with a dot", "my.app", spec(nil), "metadata.name must be a DNS-1035 label"},
		{"name starting with a digit", "1app", spec(nil), "metadata.name must be a DNS-1035 label"},
		{"name of 64 characters", long, spec(nil), "metadata.name must be a DNS-1035 label"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.com/v1", "kind": "WebApp",
				"metadata": map[string]any{"name": tc.objName, "namespace": ns},
				"spec":     tc.spec,
			}}
			err := k8s.Create(context.Background(), u)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create: err = %v, want Invalid containing %q", err, tc.want)
			}
			err = get(context.Background(), ns, tc.objName, &webappv1.WebApp{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("after a refused create, get: %v, want NotFound", err)
			}
		})
	}
	t.Run("valid names and defaults", func(t *testing.T) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "WebApp",
			"metadata": map[string]any{"name": "a-" + strings.Repeat("b", 61), "namespace": ns},
			"spec":     map[string]any{"image": "nginx"},
		}}
		if err := k8s.Create(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		app := &webappv1.WebApp{}
		if err := get(context.Background(), ns, u.GetName(), app); err != nil {
			t.Fatal(err)
		}
		if app.Spec.Replicas != 1 || app.Spec.Port != 80 {
			t.Errorf("defaults: replicas %d port %d, want 1 and 80", app.Spec.Replicas, app.Spec.Port)
		}
	})
}
