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
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

// The API server refuses, in the WebApp's own terms, what the Deployment or the claim would refuse or break later:
// nothing is stored.
func TestStorageAndPodFieldsAreRefusedInTheirOwnTerms(t *testing.T) {
	ns := newNamespace(t)
	cfg := func(name string) webappv2.Volume {
		return webappv2.Volume{Name: name, ConfigMap: &webappv2.ConfigMapVolume{Name: "cm"}}
	}
	rwo := webappv2.Volume{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi"}}
	cases := []struct {
		name string
		spec webappv2.WebAppSpec
		want string
	}{
		{"a mount of an undeclared volume", webappv2.WebAppSpec{Image: "x", Container: webappv2.ContainerSpec{VolumeMounts: []webappv2.VolumeMount{{Name: "nope", MountPath: "/a"}}}},
			"every container.volumeMounts[].name must name a volume"},
		{"two mounts at one path", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("a"), cfg("b")},
			Container: webappv2.ContainerSpec{VolumeMounts: []webappv2.VolumeMount{{Name: "a", MountPath: "/p"}, {Name: "b", MountPath: "/p"}}}}, "Duplicate value"},
		{"a '..' subPath", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("a")},
			Container: webappv2.ContainerSpec{VolumeMounts: []webappv2.VolumeMount{{Name: "a", MountPath: "/p", SubPath: "x/../../etc"}}}}, "a subPath must be relative"},
		{"an absolute subPath", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("a")},
			Container: webappv2.ContainerSpec{VolumeMounts: []webappv2.VolumeMount{{Name: "a", MountPath: "/p", SubPath: "/etc"}}}}, "a subPath must be relative"},
		{"a relative mountPath", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("a")},
			Container: webappv2.ContainerSpec{VolumeMounts: []webappv2.VolumeMount{{Name: "a", MountPath: "p"}}}}, "spec.container.volumeMounts[0].mountPath"},
		{"a volume with two sources", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{{Name: "a", ConfigMap: &webappv2.ConfigMapVolume{Name: "c"},
			EmptyDir: &webappv2.EmptyDirVolume{}}}}, "a volume needs exactly one of"},
		{"a volume name of the operator's", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("webapp-writable-0")}}, "must not start with 'webapp-'"},
		{"a ReadWriteOnce claim with two replicas", webappv2.WebAppSpec{Image: "x", Replicas: ptr.To[int32](2), Volumes: []webappv2.Volume{rwo}}, "mounted by one pod at a time"},
		{"a ReadWriteOncePod claim with autoscaling", webappv2.WebAppSpec{Image: "x", Autoscaling: &webappv2.Autoscaling{MaxReplicas: 3},
			Volumes: []webappv2.Volume{{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi", AccessMode: corev1.ReadWriteOncePod}}}}, "mounted by one pod at a time"},
		{"a ReadWriteOnce claim with a surge", webappv2.WebAppSpec{Image: "x", Rollout: webappv2.RolloutSpec{MaxSurge: ptr.To(intstr.FromInt32(1))},
			Volumes: []webappv2.Volume{rwo}}, "mounted by one pod at a time"},
		{"two owned claims", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{
			{Name: "a", Claim: &webappv2.OwnedClaim{Size: "1Gi", AccessMode: corev1.ReadWriteMany}}, {Name: "b", Claim: &webappv2.OwnedClaim{Size: "1Gi", AccessMode: corev1.ReadWriteMany}}}},
			"at most one claim"},
		{"a claim of zero bytes", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{{Name: "data", Claim: &webappv2.OwnedClaim{Size: "0"}}}}, "a size must be more than zero"},
		{"a negative size limit", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{{Name: "s", EmptyDir: &webappv2.EmptyDirVolume{SizeLimit: ptr.To[webappv2.StorageSize]("-1Gi")}}}},
			"spec.volumes[0].emptyDir.sizeLimit"},
		{"a writable path that is also a mount", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("a")},
			Container: webappv2.ContainerSpec{WritablePaths: []webappv2.AbsolutePath{"/tmp"}, VolumeMounts: []webappv2.VolumeMount{{Name: "a", MountPath: "/tmp"}}}}, "both in container.writablePaths"},
		{"a drain as long as the grace period", webappv2.WebAppSpec{Image: "x", Container: webappv2.ContainerSpec{DrainSeconds: 30}}, "less than pod.terminationGracePeriodSeconds"},
		{"an init container named app", webappv2.WebAppSpec{Image: "x", Pod: webappv2.PodSpec{InitContainers: []webappv2.ExtraContainer{{Name: "app", Image: "y"}}}}, "'app' is the app container's name"},
		{"a readiness probe on an init container", webappv2.WebAppSpec{Image: "x", Pod: webappv2.PodSpec{InitContainers: []webappv2.ExtraContainer{{Name: "i", Image: "y",
			ReadinessProbe: ptrProbe()}}}}, "only a sidecar"},
		{"an init container mounting an undeclared volume", webappv2.WebAppSpec{Image: "x", Pod: webappv2.PodSpec{InitContainers: []webappv2.ExtraContainer{{Name: "i", Image: "y",
			VolumeMounts: []webappv2.VolumeMount{{Name: "nope", MountPath: "/a"}}}}}}, "every pod.initContainers[].volumeMounts[].name"},
		{"both forms of spread", webappv2.WebAppSpec{Image: "x", Pod: webappv2.PodSpec{Spread: &webappv2.Spread{Across: webappv2.SpreadNodes},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "k", WhenUnsatisfiable: corev1.DoNotSchedule}}}}, "set pod.spread or pod.topologySpreadConstraints"},
		// One directory spelled twice would be two mounts at one path: only the clean spelling is accepted.
		{"/data beside /data/", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("a"), cfg("b")},
			Container: webappv2.ContainerSpec{VolumeMounts: []webappv2.VolumeMount{{Name: "a", MountPath: "/data"}, {Name: "b", MountPath: "/data/"}}}}, "a mountPath must be a clean absolute path"},
		{"/data beside //data", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("a"), cfg("b")},
			Container: webappv2.ContainerSpec{VolumeMounts: []webappv2.VolumeMount{{Name: "a", MountPath: "/data"}, {Name: "b", MountPath: "//data"}}}}, "a mountPath must be a clean absolute path"},
		{"/data beside /data/.", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("a"), cfg("b")},
			Container: webappv2.ContainerSpec{VolumeMounts: []webappv2.VolumeMount{{Name: "a", MountPath: "/data"}, {Name: "b", MountPath: "/data/."}}}}, "a mountPath must be a clean absolute path"},
		{"a '.' segment inside a mountPath", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("a")},
			Container: webappv2.ContainerSpec{VolumeMounts: []webappv2.VolumeMount{{Name: "a", MountPath: "/srv/./data"}}}}, "a mountPath must be a clean absolute path"},
		{"an init container's /mnt/ beside /mnt", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("a"), cfg("b")},
			Pod: webappv2.PodSpec{InitContainers: []webappv2.ExtraContainer{{Name: "i", Image: "y",
				VolumeMounts: []webappv2.VolumeMount{{Name: "a", MountPath: "/mnt"}, {Name: "b", MountPath: "/mnt/"}}}}}}, "a mountPath must be a clean absolute path"},
		{"a writable /tmp/ beside a mount at /tmp", webappv2.WebAppSpec{Image: "x", Volumes: []webappv2.Volume{cfg("a")},
			Container: webappv2.ContainerSpec{WritablePaths: []webappv2.AbsolutePath{"/tmp/"}, VolumeMounts: []webappv2.VolumeMount{{Name: "a", MountPath: "/tmp"}}}}, "a path must be a clean absolute path"},
		{"writable /tmp and //tmp", webappv2.WebAppSpec{Image: "x", Container: webappv2.ContainerSpec{WritablePaths: []webappv2.AbsolutePath{"/tmp", "//tmp"}}},
			"a path must be a clean absolute path"},
		// The canary's Service selects pods by canary-of: a stable pod carrying it would get the canary's traffic.
		{"a pod label of the operator's canary", webappv2.WebAppSpec{Image: "x", Pod: webappv2.PodSpec{Labels: map[string]string{"webapp.example.com/canary-of": "web"}}},
			"pod.labels must not set a key under webapp.example.com/"},
		{"a pod label under the operator's prefix", webappv2.WebAppSpec{Image: "x", Pod: webappv2.PodSpec{Labels: map[string]string{"webapp.example.com/anything": "x"}}},
			"pod.labels must not set a key under webapp.example.com/"},
		// The config hash is the operator's: one set by the user would be taken for the configuration's.
		{"a pod annotation of the operator's config hash", webappv2.WebAppSpec{Image: "x", Pod: webappv2.PodSpec{Annotations: map[string]string{"webapp.example.com/config-hash": "x"}}},
			"pod.annotations must not set a key under webapp.example.com/"},
	}
	for i, tc := range cases {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bad-%d", i)}, Spec: tc.spec}
		err := k8s.Create(context.Background(), app)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
		if err := get(context.Background(), ns, app.Name, &webappv2.WebApp{}); err == nil {
			t.Errorf("%s: stored anyway", tc.name)
		}
	}

	// A hostPath (or any other source) is not silently something else: kubectl's strict field validation refuses
	// the unknown field, and without it the volume left with no source is refused.
	hostPath := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": webappv2.GroupVersion.String(), "kind": "WebApp",
		"metadata": map[string]any{"namespace": ns, "name": "hostpath"},
		"spec":     map[string]any{"image": "x", "volumes": []any{map[string]any{"name": "h", "hostPath": map[string]any{"path": "/etc"}}}},
	}}
	for _, strict := range []bool{true, false} {
		var opts []client.CreateOption
		want := "a volume needs exactly one of"
		if strict {
			opts, want = append(opts, client.FieldValidation("Strict")), `unknown field "spec.volumes[0].hostPath"`
		}
		if err := k8s.Create(context.Background(), hostPath.DeepCopy(), opts...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("hostPath (strict %v): error %v, want one saying %q", strict, err, want)
		}
	}

	// v1's pod labels convert to v2's: the operator's prefix is refused there too.
	v1 := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "v1-canary-label"},
		Spec: webappv1.WebAppSpec{Image: "x", PodLabels: map[string]string{"webapp.example.com/canary-of": "web"}}}
	if err := k8s.Create(context.Background(), v1); err == nil || !strings.Contains(err.Error(), "podLabels must not set a key under webapp.example.com/") {
		t.Errorf("v1 podLabels with webapp.example.com/canary-of: error %v", err)
	}
	v1.Name, v1.Spec.PodLabels, v1.Spec.PodAnnotations = "v1-config-hash", nil, map[string]string{"webapp.example.com/config-hash": "x"}
	if err := k8s.Create(context.Background(), v1); err == nil || !strings.Contains(err.Error(), "podAnnotations must not set a key under webapp.example.com/") {
		t.Errorf("v1 podAnnotations with webapp.example.com/config-hash: error %v", err)
	}

	// An owned claim's class and access mode cannot change, nor its size shrink; it may grow. The claim is the
	// WebApp's PersistentVolumeClaim of its name whatever the volume is called: a rename in the same edit changes
	// nothing of that (it was the way past the rules, into a Deployment of 3 pods on a ReadWriteOnce claim).
	ok := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claim"}, Spec: webappv2.WebAppSpec{Image: "x",
		Volumes: []webappv2.Volume{{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi", StorageClassName: ptr.To("slow")}}}}}
	if err := k8s.Create(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	for _, rename := range []string{"", "store"} {
		for _, tc := range []struct {
			name   string
			change func(*webappv2.WebAppSpec)
			want   string
		}{
			{"shrink", func(s *webappv2.WebAppSpec) { s.Volumes[0].Claim.Size = "512Mi" }, "claim.size cannot shrink"},
			{"another class", func(s *webappv2.WebAppSpec) { s.Volumes[0].Claim.StorageClassName = ptr.To("fast") }, "claim.storageClassName cannot change"},
			{"the default class", func(s *webappv2.WebAppSpec) { s.Volumes[0].Claim.StorageClassName = nil }, "claim.storageClassName cannot change"},
			{"another access mode", func(s *webappv2.WebAppSpec) { s.Volumes[0].Claim.AccessMode = corev1.ReadWriteOncePod }, "claim.accessMode cannot change"},
			{"ReadWriteMany with 3 replicas", func(s *webappv2.WebAppSpec) {
				s.Volumes[0].Claim.AccessMode, s.Replicas = corev1.ReadWriteMany, ptr.To[int32](3)
			}, "claim.accessMode cannot change"},
			{"grow", func(s *webappv2.WebAppSpec) { s.Volumes[0].Claim.Size = "2Gi" }, ""},
		} {
			app := &webappv2.WebApp{}
			if err := get(context.Background(), ns, "claim", app); err != nil {
				t.Fatal(err)
			}
			before := app.Spec.DeepCopy()
			if rename != "" {
				app.Spec.Volumes[0].Name = rename
			}
			tc.change(&app.Spec)
			err := k8s.Update(context.Background(), app)
			name := fmt.Sprintf("%s (volume renamed %q)", tc.name, rename)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s: refused: %v", name, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s: error %v, want one saying %q", name, err, tc.want)
			}
			stored := &webappv2.WebApp{}
			if err := get(context.Background(), ns, "claim", stored); err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && !equality.Semantic.DeepEqual(stored.Spec, *before) {
				t.Errorf("%s: stored anyway: %+v", name, stored.Spec)
			}
		}
	}
	stored := &webappv2.WebApp{}
	if err := get(context.Background(), ns, "claim", stored); err != nil || stored.Spec.Volumes[0].Name != "store" || stored.Spec.Volumes[0].Claim.Size != "2Gi" {
		t.Errorf("after the accepted rename and growth: %+v (%v)", stored.Spec.Volumes, err)
	}
}

// A PersistentVolumeClaim of the WebApp's name that is not the WebApp's is never mounted: the pods would read and
// write another owner's data. A WebApp created beside one gets no Deployment; one that adds a claim keeps its
// Deployment as it was. Ready says why, naming the claim, both before and after a restart; once the claim is gone
// the WebApp's own is created and mounted.
func TestAClaimNotOursIsNeverMounted(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	theirs := func(name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	}
	for _, name := range []string{"fresh", "grown"} {
		if err := k8s.Create(ctx, theirs(name)); err != nil {
			t.Fatal(err)
		}
	}
	op := startOperator(t, ns, time.Second)
	data := []webappv2.Volume{{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi"}}}
	mounts := []webappv2.VolumeMount{{Name: "data", MountPath: "/data"}}
	// grown has a Deployment first, without the claim.
	if err := k8s.Create(ctx, &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grown"}, Spec: webappv2.WebAppSpec{Image: "x"}}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "grown", metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)
	if err := k8s.Create(ctx, &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"}, Spec: webappv2.WebAppSpec{Image: "x",
		Volumes: data, Container: webappv2.ContainerSpec{VolumeMounts: mounts}}}); err != nil {
		t.Fatal(err)
	}
	update(t, ns, "grown", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Volumes, a.Spec.Container.VolumeMounts = data, mounts })
	held := func() {
		t.Helper()
		for _, name := range []string{"fresh", "grown"} {
			// The status of this generation is written after its children's decision: the Deployment is as held.
			readyFalse(t, ns, name, webappv2.ReasonChildNotOwned, "PersistentVolumeClaim "+ns+"/"+name, "not managed by webapp-operator", "is held as it is")
		}
		if err := get(ctx, ns, "fresh", &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			t.Errorf("fresh's Deployment: %v, want none", err)
		}
		dep := &appsv1.Deployment{}
		if err := get(ctx, ns, "grown", dep); err != nil {
			t.Fatal(err)
		}
		if vols := dep.Spec.Template.Spec.Volumes; len(vols) != 0 {
			t.Errorf("grown's Deployment mounts %+v, want its pods as they were", vols)
		}
		for _, name := range []string{"fresh", "grown"} {
			if pvc, ours, err := claimOf(ctx, ns, name); err != nil || ours || len(pvc.Labels) != 0 {
				t.Errorf("%s's claim taken over: %+v (%v)", name, pvc, err)
			}
		}
	}
	held()
	op = restartCostsNoWrites(t, op, ns)
	held()

	// Their claims gone, the WebApps' own are created and mounted.
	for _, name := range []string{"fresh", "grown"} {
		if err := k8s.Delete(ctx, theirs(name)); err != nil {
			t.Fatal(err)
		}
		// The claim protection finalizer, where admission added it, is the controller manager's to remove, and none
		// runs here.
		testutil.Eventually(t, wait10s, "their claim "+name+" gone", func(ctx context.Context) error {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := get(ctx, ns, name, pvc); apierrors.IsNotFound(err) {
				return nil
			} else if err != nil {
				return err
			}
			pvc.Finalizers = nil
			if err := k8s.Update(ctx, pvc); err != nil {
				return err
			}
			return fmt.Errorf("finalizers removed; waiting for the deletion")
		})
	}
	for _, name := range []string{"fresh", "grown"} {
		waitClaim(t, ns, name, true)
		testutil.Eventually(t, wait10s, name+"'s Deployment mounts its claim", func(ctx context.Context) error {
			dep := &appsv1.Deployment{}
			if err := get(ctx, ns, name, dep); err != nil {
				return err
			}
			if vols := dep.Spec.Template.Spec.Volumes; len(vols) != 1 || vols[0].PersistentVolumeClaim == nil || vols[0].PersistentVolumeClaim.ClaimName != name {
				return fmt.Errorf("volumes %+v", vols)
			}
			return nil
		})
	}
	restartCostsNoWrites(t, op, ns)
}

// claimOf is the WebApp's claim as the server has it, and whether the WebApp controls it.
func claimOf(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, bool, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := get(ctx, ns, name, pvc); err != nil {
		return nil, false, err
	}
	ref := metav1.GetControllerOf(pvc)
	return pvc, ref != nil && ref.Kind == "WebApp" && ref.Name == name, nil
}

func waitClaim(t *testing.T, ns, name string, controlled bool) *corev1.PersistentVolumeClaim {
	t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	testutil.Eventually(t, wait10s, fmt.Sprintf("claim %s controlled by its WebApp = %v", name, controlled), func(ctx context.Context) error {
		var ours bool
		var err error
		if pvc, ours, err = claimOf(ctx, ns, name); err != nil {
			return err
		}
		if ours != controlled {
			return fmt.Errorf("owner references %+v", pvc.OwnerReferences)
		}
		return nil
	})
	return pvc
}

func setVolumes(t *testing.T, ns, name string, vols []webappv2.Volume) {
	t.Helper()
	update(t, ns, name, &webappv2.WebApp{}, func(app *webappv2.WebApp) { app.Spec.Volumes = vols })
}

// An owned claim's data is never taken away by a spec edit, and outlives its WebApp unless it says Delete: removed
// from the spec it is released (kept, no owner), added back it is taken up again, and the WebApp's deletion
// releases it through the finalizer; with deletionPolicy Delete garbage collection may take it, and no finalizer is
// needed. Zero writes at rest and after a restart throughout.
func TestAnOwnedClaimOutlivesItsWebApp(t *testing.T) {
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	data := []webappv2.Volume{{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi"}}}
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{Image: "x", Volumes: data,
		Container: webappv2.ContainerSpec{VolumeMounts: []webappv2.VolumeMount{{Name: "data", MountPath: "/data"}}}}}
	if err := k8s.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	pvc := waitClaim(t, ns, "web", true)
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "1Gi" || !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("claim spec = %+v", pvc.Spec)
	}
	waitFinalizer(t, ns, true)
	dep := &appsv1.Deployment{}
	testutil.Eventually(t, wait10s, "the Deployment rolls out by Recreate and mounts the claim", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", dep); err != nil {
			return err
		}
		vols := dep.Spec.Template.Spec.Volumes
		if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || len(vols) != 1 || vols[0].PersistentVolumeClaim == nil || vols[0].PersistentVolumeClaim.ClaimName != "web" {
			return fmt.Errorf("strategy %+v, volumes %+v", dep.Spec.Strategy, vols)
		}
		return nil
	})
	op = restartCostsNoWrites(t, op, ns)

	// Removed from the spec: released, kept.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Volumes, a.Spec.Container.VolumeMounts = nil, nil })
	waitClaim(t, ns, "web", false)
	waitFinalizer(t, ns, false)
	op = restartCostsNoWrites(t, op, ns)

	// Added back: taken up again (it carries our managed-by label and no owner).
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Volumes = data })
	waitClaim(t, ns, "web", true)
	waitFinalizer(t, ns, true)

	// Deleted: the claim stays, with its spec, without an owner; the WebApp goes.
	op.stop()
	op = startOperator(t, ns, time.Second)
	if err := k8s.Delete(context.Background(), &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	waitWebAppGone(t, ns)
	kept := waitClaim(t, ns, "web", false)
	if q := kept.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "1Gi" || len(kept.OwnerReferences) != 0 {
		t.Errorf("kept claim = %+v", kept)
	}

	// deletionPolicy Delete: an owner reference for garbage collection, and no finalizer.
	del := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scratch"}, Spec: webappv2.WebAppSpec{Image: "x",
		Volumes: []webappv2.Volume{{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi", DeletionPolicy: webappv2.ClaimDelete}}}}}
	if err := k8s.Create(context.Background(), del); err != nil {
		t.Fatal(err)
	}
	waitClaim(t, ns, "scratch", true)
	restartCostsNoWrites(t, op, ns)
	got := &webappv2.WebApp{}
	if err := get(context.Background(), ns, "scratch", got); err != nil || len(got.Finalizers) != 0 {
		t.Errorf("finalizers %v (%v), want none", got.Finalizers, err)
	}
}

// A single-writer claim added to a WebApp that rolled by RollingUpdate switches its Deployment to Recreate: the
// server's defaulted rollingUpdate, which nobody owns and the Deployment API refuses beside Recreate
// (kubernetes/kubernetes#24198), is taken over first, so it goes with the switch; never stuck. Removing the claim
// brings the rolling update back. At rest after each step: zero writes, also after a restart.
func TestASingleWriterClaimSwitchesTheRolloutToRecreate(t *testing.T) {
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{Image: "x"}}
	if err := k8s.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	strategy := func(want appsv1.DeploymentStrategyType, rollingUpdate bool) {
		t.Helper()
		testutil.Eventually(t, wait10s, fmt.Sprintf("strategy %s", want), func(ctx context.Context) error {
			dep := &appsv1.Deployment{}
			if err := get(ctx, ns, "web", dep); err != nil {
				return err
			}
			if dep.Spec.Strategy.Type != want || (dep.Spec.Strategy.RollingUpdate != nil) != rollingUpdate {
				return fmt.Errorf("strategy %+v", dep.Spec.Strategy)
			}
			return nil
		})
	}
	strategy(appsv1.RollingUpdateDeploymentStrategyType, true)
	op = restartCostsNoWrites(t, op, ns)

	setVolumes(t, ns, "web", []webappv2.Volume{{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi", AccessMode: corev1.ReadWriteOncePod}}})
	strategy(appsv1.RecreateDeploymentStrategyType, false)
	waitClaim(t, ns, "web", true)
	op = restartCostsNoWrites(t, op, ns)

	setVolumes(t, ns, "web", nil)
	strategy(appsv1.RollingUpdateDeploymentStrategyType, true)
	restartCostsNoWrites(t, op, ns)
}

// A mounted ConfigMap that is missing is said in Ready by name within seconds (the pods cannot start, and show it
// nowhere but in the kubelet's events); once it exists, the pod template rolls (its content is in the config hash)
// and the reason goes. An optional one is not trouble.
func TestAMissingMountedConfigMapIsSaidByName(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{Image: "x",
		Volumes: []webappv2.Volume{
			{Name: "config", ConfigMap: &webappv2.ConfigMapVolume{Name: "site"}},
			{Name: "extra", ConfigMap: &webappv2.ConfigMapVolume{Name: "maybe", Optional: ptr.To(true)}},
		},
		Container: webappv2.ContainerSpec{VolumeMounts: []webappv2.VolumeMount{{Name: "config", MountPath: "/etc/site"}}}}}
	if err := k8s.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	// As the Deployment controller would (none runs here): the spec observed, no pod ready.
	start := time.Now()
	dep := &appsv1.Deployment{}
	testutil.Eventually(t, wait10s, "the Deployment observed", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", dep); err != nil {
			return err
		}
		dep.Status.ObservedGeneration = dep.Generation
		return k8s.Status().Update(ctx, dep)
	})
	readyFalse(t, ns, "web", "MountFailing", `configmap "site" (volume "config") not found`)
	t.Logf("MountFailing said %v after the create", time.Since(start).Round(time.Millisecond))
	if err := get(context.Background(), ns, "web", dep); err != nil {
		t.Fatal(err)
	}
	before := dep.Spec.Template.Annotations["webapp.example.com/config-hash"]
	if err := k8s.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site"}, Data: map[string]string{"index.html": "hi"}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait10s, "the template rolled and MountFailing gone", func(ctx context.Context) error {
		got := &webappv2.WebApp{}
		if err := get(ctx, ns, "web", got); err != nil {
			return err
		}
		if err := get(ctx, ns, "web", dep); err != nil {
			return err
		}
		if h := dep.Spec.Template.Annotations["webapp.example.com/config-hash"]; h == before || h == "" {
			return fmt.Errorf("config hash %q, was %q", h, before)
		}
		for _, c := range got.Status.Conditions {
			if c.Reason == "MountFailing" {
				return fmt.Errorf("%s still %s: %s", c.Type, c.Reason, c.Message)
			}
		}
		return nil
	})
}

// A claim removed from the spec is released with its data, and taken up again when a claim volume comes back: with
// the access modes it was made with, which no edit can change. A volume that comes back asking for others
// (ReadWriteMany, to run 3 pods) would roll 3 pods by a rolling update onto a claim one pod at a time mounts, and
// the claim's apply be refused: the Deployment is held as it is instead, and Ready says why.
func TestAClaimTakenUpAgainKeepsItsAccessModes(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	mounts := []webappv2.VolumeMount{{Name: "data", MountPath: "/data"}}
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{Image: "x",
		Volumes: []webappv2.Volume{{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi"}}}, Container: webappv2.ContainerSpec{VolumeMounts: mounts}}}
	if err := k8s.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	waitClaim(t, ns, "web", true)
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Volumes, a.Spec.Container.VolumeMounts = nil, nil })
	waitClaim(t, ns, "web", false)
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Spec.Replicas = ptr.To[int32](3)
		a.Spec.Volumes = []webappv2.Volume{{Name: "shared", Claim: &webappv2.OwnedClaim{Size: "1Gi", AccessMode: corev1.ReadWriteMany}}}
		a.Spec.Container.VolumeMounts = []webappv2.VolumeMount{{Name: "shared", MountPath: "/data"}}
	})
	readyFalse(t, ns, "web", webappv2.ReasonInvalidChild, "Deployment "+ns+"/web is held as it is", "its access modes are [ReadWriteOnce]")
	dep := &appsv1.Deployment{}
	if err := get(context.Background(), ns, "web", dep); err != nil {
		t.Fatal(err)
	}
	if n := ptr.Deref(dep.Spec.Replicas, 0); n != 1 || len(dep.Spec.Template.Spec.Volumes) != 0 {
		t.Errorf("the Deployment moved on: %d replicas, strategy %s, volumes %+v", n, dep.Spec.Strategy.Type, dep.Spec.Template.Spec.Volumes)
	}
	if pvc, _, err := claimOf(context.Background(), ns, "web"); err != nil || !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("claim %+v (%v)", pvc, err)
	}
}
