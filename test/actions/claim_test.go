package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

// The claim a WebApp owns (v2 spec.volumes[].claim, mounted through spec.container.volumeMounts) in the actions
// test. Another client (field manager "storage") gives a WebApp a claim volume, renames it (accepted: the claim is
// the PersistentVolumeClaim of the WebApp's name whatever the volume is called), renames it together with a change
// of access mode, storage class or a smaller size (the CRD's transition rules must refuse it), removes it (the claim
// is released) and adds it back (taken up again); users delete the claim, and another user creates a claim of the
// WebApp's name, before or after the WebApp adds its claim volume. Claims bind to PersistentVolumes the test keeps
// in a small pool (the cluster has no provisioner), so the pods mounting them run on the kwok node.

const (
	// claimClass is the StorageClass of the test's volumes: no provisioner, bound at once by the binder.
	claimClass = "actions-claims"
	// claimSize is the size of every claim the test gives a WebApp: one size, so a released claim taken up again is
	// never resized (the class allows no expansion). smallerSize is the refused shrink.
	claimSize   = "1Gi"
	smallerSize = "512Mi"
	// volumeCapacity is the size of each PersistentVolume of the pool: more than any claim asks.
	volumeCapacity = "5Gi"
	// freeVolumes is how many unbound volumes the pool keeps before an action that may create a claim.
	freeVolumes = 3
	// claimMountPath is where the claim volume is mounted, whatever it is called.
	claimMountPath = "/var/lib/app-data"
	// teamClaim is a claim of another team the WebApps may mount by name (volumes[].persistentVolumeClaim).
	teamClaim = "team-files"
	// poolLabel marks the PersistentVolumes of one sequence's pool (its value: the namespace).
	poolLabel = "actions.example.com/pool"
)

var (
	pvcKind        = kind{"PersistentVolumeClaim", "pvc", schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "v1"}
	podKind        = kind{"Pod", "pod", podGVR, "v1"}
	replicaSetKind = kind{"ReplicaSet", "replicaset", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, "apps/v1"}
	// mountKinds are the kinds the claims' history records beside the main one's: who mounts what, and what it was.
	mountKinds      = []kind{pvcKind, podKind, replicaSetKind}
	pvGVR           = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}
	storageClassGVR = schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}
)

// claimVol is the owned claim volume the "storage" client last applied to a WebApp.
type claimVol struct {
	name, mode, class, size string
	policy                  webappv2.ClaimDeletionPolicy
	// shared: the WebApp also mounts teamClaim by name.
	shared bool
}

func (c *claimVol) String() string {
	return fmt.Sprintf("volume %s (claim %s %s, class %s, deletionPolicy %s)", c.name, c.mode, c.size, c.class, c.policy)
}

// storage is what the test knows of the claims of one sequence.
type storage struct {
	hist    *history // every version of the namespace's claims, pods and ReplicaSets
	markers int
	synced  int64 // resourceVersion up to which hist has recorded every change of its kinds
	// vols is each WebApp's (by UID) claim volume as last applied (nil: none); refs the claims its spec ever named
	// by persistentVolumeClaim.
	vols map[types.UID]*claimVol
	refs map[types.UID]map[string]bool
	// deleted are the claims a user (the test) deleted.
	deleted map[types.UID]bool
	volumes int // PersistentVolumes created for the pool
	// Invariant 10's progress: the versions judged so far, the pods judged at their scheduling, and the claims each
	// Deployment's template named at its last version judged.
	podCursor, depCursor int
	judged               map[types.UID]bool
	named                map[types.UID]map[string]bool
}

// store is the sequence's storage state, made (the class, the history and its markers) on first use.
func (s *seq) store() *storage {
	if s.storage != nil {
		return s.storage
	}
	ensureClaimClass(s.reporting())
	s.storage = &storage{hist: watchMounts(s.t, s.ns), vols: map[types.UID]*claimVol{}, refs: map[types.UID]map[string]bool{},
		deleted: map[types.UID]bool{}, judged: map[types.UID]bool{}, named: map[types.UID]map[string]bool{}}
	ns := s.ns
	s.t.Cleanup(func() {
		// The pool goes with the sequence (a volume still bound goes once the namespace's claims are gone).
		_ = dyn.Resource(pvGVR).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: poolLabel + "=" + ns})
	})
	return s.storage
}

// ensureClaimClass creates the test's StorageClass, once per cluster.
func ensureClaimClass(t testing.TB) {
	sc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
		"metadata": map[string]any{"name": claimClass}, "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate",
		"reclaimPolicy": "Retain"}}
	if _, err := dyn.Resource(storageClassGVR).Create(context.Background(), sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating StorageClass %s: %v", claimClass, err)
	}
}

// watchMounts records every version of the claims, pods and ReplicaSets of namespace ns until the test ends, from
// what exists now (listed, each object's first version) on; and creates the markers its sync touches.
func watchMounts(t *testing.T, ns string) *history {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &history{byKind: map[string][]version{}, lastRV: map[string]int64{}, stop: cancel}
	t.Cleanup(cancel)
	for _, k := range mountKinds {
		lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return dyn.Resource(k.gvr).Namespace(ns).Watch(ctx, o)
		}}
		list, err := dyn.Resource(k.gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var vs []version
		for i := range list.Items {
			rv, _ := strconv.ParseInt(list.Items[i].GetResourceVersion(), 10, 64)
			vs = append(vs, version{at: time.Now(), rv: rv, obj: &list.Items[i]})
		}
		sort.Slice(vs, func(i, j int) bool { return vs[i].rv < vs[j].rv })
		h.byKind[k.name] = vs
		h.lastRV[k.name], _ = strconv.ParseInt(list.GetResourceVersion(), 10, 64)
		w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), lw)
		if err != nil {
			t.Fatal(err)
		}
		go h.record(ctx, k.name, w)
	}
	// A claim of a class that does not exist (never bound), a pod that is never scheduled (a scheduling gate) and a
	// ReplicaSet of no pods: nothing else uses them, and no WebApp has their name.
	objs := []map[string]any{
		{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": markerName}, "spec": map[string]any{
			"accessModes": []any{"ReadWriteOnce"}, "storageClassName": "zz-marker-none", "resources": map[string]any{"requests": map[string]any{"storage": "1Mi"}}}},
		{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": markerName}, "spec": map[string]any{
			"schedulingGates": []any{map[string]any{"name": "example.com/marker"}}, "containers": []any{map[string]any{"name": "c", "image": "marker:1"}}}},
		{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": map[string]any{"name": markerName}, "spec": map[string]any{
			"replicas": int64(0), "selector": map[string]any{"matchLabels": map[string]any{"mounts-marker": "yes"}}, "template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"mounts-marker": "yes"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "marker:1"}}}}}},
	}
	for i, o := range objs {
		if _, err := dyn.Resource(mountKinds[i].gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: o}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the %s marker: %v", mountKinds[i].name, err)
		}
	}
	return h
}

// sync waits until the claims' history has recorded everything stored before the call (as history.sync does).
func (st *storage) sync(t testing.TB, ns string) {
	t.Helper()
	st.markers++
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"marker":"%d"}}}`, st.markers)
	want := map[string]int64{}
	for i, k := range mountKinds {
		u, err := dyn.Resource(k.gvr).Namespace(ns).Patch(context.Background(), markerName, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("touching the %s marker: %v", k.name, err)
		}
		want[k.name], _ = strconv.ParseInt(u.GetResourceVersion(), 10, 64)
		if i == 0 {
			// Touched first: every kind has been recorded up to it once each has reached its own marker.
			defer func(rv int64) { st.synced = rv }(want[k.name])
		}
	}
	testutil.Eventually(t, 30*time.Second, "the claims' watches caught up", func(context.Context) error {
		st.hist.mu.Lock()
		defer st.hist.mu.Unlock()
		if st.hist.err != nil {
			return st.hist.err
		}
		for k, rv := range want {
			if st.hist.lastRV[k] < rv {
				return fmt.Errorf("%s watch at %d, want %d", k, st.hist.lastRV[k], rv)
			}
		}
		return nil
	})
}

// --- the actions ---

// actStorage is the "storage" client's move on a live WebApp, a few steps of its own: give it a claim volume (or
// give it back) when it has none; then, maybe, try a rename with a change the claim cannot take (refused, nothing
// changes), and rename the volume, remove it (and maybe add it back once the claim is released), or delete the claim
// of its name. Drawn as one action, so its weight says how often the claim's life is walked, not each move.
func (s *seq) actStorage(a *app) bool {
	if a.state != alive {
		return false
	}
	s.store()
	pvc := s.get(pvcKind, a.name)
	if a.claim == nil {
		if pvc != nil && pvc.GetDeletionTimestamp() == nil && s.chance(0.3) {
			s.deleteClaim(a, pvc)
			return true
		}
		s.addClaimVolume(a, pvc)
		if a.claim == nil || s.chance(0.3) {
			return true
		}
		s.actLetWork(a)
	}
	if s.chance(0.6) {
		s.renameWithChange(a)
	}
	switch n := s.rng.IntN(10); {
	case n < 3:
		s.renameClaimVolume(a)
	case n < 6:
		s.removeClaimVolume(a)
		if s.chance(0.5) {
			s.addBackOnceReleased(a)
		}
	case n < 8:
		if pvc := s.get(pvcKind, a.name); pvc != nil && pvc.GetDeletionTimestamp() == nil {
			s.deleteClaim(a, pvc)
		}
	}
	return true
}

// addBackOnceReleased waits (up to 5 s) until WebApp a's claim is released, then adds the claim volume back: the
// released claim is taken up again.
func (s *seq) addBackOnceReleased(a *app) {
	deadline := time.Now().Add(5 * time.Second)
	var pvc *unstructured.Unstructured
	for {
		pvc = s.get(pvcKind, a.name)
		if pvc == nil || metav1.GetControllerOfNoCopy(pvc) == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.addClaimVolume(a, pvc)
}

// addClaimVolume gives WebApp a a claim volume (ReadWriteMany, so the other actors' replicas, autoscaling and canaries
// stay valid), sometimes with the team's claim mounted by name beside it.
func (s *seq) addClaimVolume(a *app, pvc *unstructured.Unstructured) {
	c := &claimVol{name: pick(s, "data", "state", "files"), mode: string(corev1.ReadWriteMany), class: claimClass, size: claimSize,
		policy: pick(s, webappv2.ClaimRetain, webappv2.ClaimDelete), shared: s.chance(0.3)}
	beside := ""
	switch {
	case pvc == nil:
	case s.isForeign(pvc):
		beside = fmt.Sprintf(" beside the foreign PersistentVolumeClaim %s", a.name)
	case metav1.GetControllerOfNoCopy(pvc) == nil:
		beside = fmt.Sprintf(" back (the released PersistentVolumeClaim %s is taken up again)", a.name)
	default:
		beside = fmt.Sprintf(" (PersistentVolumeClaim %s exists, controlled by %s)", a.name, metav1.GetControllerOfNoCopy(pvc).UID)
	}
	s.record(fmt.Sprintf("give WebApp %s a claim %s%s%s", a.name, c, map[bool]string{true: " and the team's claim " + teamClaim}[c.shared], beside))
	s.t.Logf("claim actor: WebApp %s gets a claim volume%s", a.name, beside)
	s.topUpVolumes()
	if c.shared {
		s.ensureTeamClaim()
	}
	if err := s.applyStorage(a, c); err != nil {
		s.fail("applying a claim volume to WebApp %s: %v", a.name, err)
	}
}

// renameClaimVolume renames WebApp a's claim volume alone: accepted, and the claim stays the same.
func (s *seq) renameClaimVolume(a *app) {
	c := *a.claim
	c.name = pick(s, slices.DeleteFunc([]string{"data", "state", "files"}, func(n string) bool { return n == a.claim.name })...)
	s.record(fmt.Sprintf("rename the claim volume of WebApp %s from %s to %s", a.name, a.claim.name, c.name))
	s.t.Logf("claim actor: rename the claim volume of WebApp %s alone", a.name)
	if err := s.applyStorage(a, &c); err != nil {
		s.fail("renaming the claim volume of WebApp %s (nothing else changes: the claim stays the same) was refused: %v", a.name, err)
	}
}

// renameWithChange renames WebApp a's claim volume and changes its access mode, class or size down: the CRD's
// transition rules must refuse it whatever the volume is now called.
func (s *seq) renameWithChange(a *app) {
	c := *a.claim
	c.name = pick(s, slices.DeleteFunc([]string{"data", "state", "files"}, func(n string) bool { return n == a.claim.name })...)
	var change, words string
	switch s.rng.IntN(3) {
	case 0:
		c.mode, change, words = string(corev1.ReadWriteOnce), "accessMode ReadWriteOnce", "claim.accessMode cannot change"
	case 1:
		c.class, change, words = "actions-other", "storageClassName actions-other", "claim.storageClassName cannot change"
	default:
		c.size, change, words = smallerSize, "size "+smallerSize, "claim.size cannot shrink"
	}
	s.record(fmt.Sprintf("rename the claim volume of WebApp %s from %s to %s with %s (must be refused)", a.name, a.claim.name, c.name, change))
	err := s.applyStorage(a, &c)
	switch {
	case err == nil:
		s.fail("invariant (the claim's transition rules hold over a rename): the WebApp API accepted renaming WebApp %s's claim volume from %s to %s with %s; "+
			"its claim is the PersistentVolumeClaim of its name whatever the volume is called, and a claim's %s cannot take that change:\n%s",
			a.name, a.claim.name, c.name, change, strings.Fields(change)[0], toYAML(s.getV2(a.name)))
	case !strings.Contains(err.Error(), words):
		s.fail("renaming WebApp %s's claim volume with %s was refused, but not by the claim's transition rule (%q): %v", a.name, change, words, err)
	}
	s.t.Logf("claim actor: refused rename with %s of WebApp %s's claim volume: %v", change, a.name, err)
}

// removeClaimVolume removes WebApp a's claim volume (and the team's claim, if mounted): the claim is released.
func (s *seq) removeClaimVolume(a *app) {
	s.record(fmt.Sprintf("remove the claim volume %s of WebApp %s (its claim is released, kept with its data)", a.claim.name, a.name))
	s.t.Logf("claim actor: remove the claim volume of WebApp %s", a.name)
	if err := s.applyStorage(a, nil); err != nil {
		s.fail("removing the claim volume of WebApp %s: %v", a.name, err)
	}
}

// deleteClaim deletes the claim of WebApp a's name, whoever's it is, as `kubectl delete pvc` does: one in use by a
// scheduled pod stays (terminating) until no pod uses it.
func (s *seq) deleteClaim(a *app, pvc *unstructured.Unstructured) {
	whose := "the WebApp's"
	switch {
	case s.isForeign(pvc):
		whose = "the foreign"
	case metav1.GetControllerOfNoCopy(pvc) == nil:
		whose = "the released"
	}
	s.record(fmt.Sprintf("delete %s PersistentVolumeClaim %s", whose, a.name), fmt.Sprintf("kubectl -n %s delete pvc/%s --wait=false", s.ns, a.name))
	s.t.Logf("claim actor: delete %s PersistentVolumeClaim %s", whose, a.name)
	s.topUpVolumes()
	uid := pvc.GetUID()
	err := dyn.Resource(pvcKind.gvr).Namespace(s.ns).Delete(context.Background(), a.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		s.note("PersistentVolumeClaim %s was gone or replaced meanwhile: %v", a.name, err)
		return
	case err != nil:
		s.fail("deleting PersistentVolumeClaim %s: %v", a.name, err)
	}
	s.store().deleted[uid] = true
}

// actCreateForeignClaim has another user create a PersistentVolumeClaim of the WebApp's name (no labels of ours,
// no owner): where the name is taken by the WebApp's claim, that user deletes it first and creates theirs at once
// (it stays taken while a scheduled pod uses the claim).
func (s *seq) actCreateForeignClaim(a *app) bool {
	s.store()
	cur := s.get(pvcKind, a.name)
	if cur != nil && (s.isForeign(cur) || cur.GetDeletionTimestamp() != nil) {
		return false
	}
	beside := "a WebApp without a claim volume"
	switch {
	case a.state != alive:
		beside = "no WebApp"
	case a.claim != nil:
		beside = "a claim volume"
	}
	o := map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": a.name}, "spec": map[string]any{
		"accessModes": []any{pick(s, "ReadWriteOnce", "ReadWriteMany")}, "storageClassName": pick(s, claimClass, "foreign-class"),
		"resources": map[string]any{"requests": map[string]any{"storage": claimSize}}}}
	u := &unstructured.Unstructured{Object: o}
	if cur != nil {
		s.record(fmt.Sprintf("another user deletes PersistentVolumeClaim %s and creates a foreign one of the name, beside %s", a.name, beside),
			fmt.Sprintf("kubectl -n %s delete pvc/%s --wait=false", s.ns, a.name), s.heredoc("apply", u))
		s.topUpVolumes()
		uid := cur.GetUID()
		if err := dyn.Resource(pvcKind.gvr).Namespace(s.ns).Delete(context.Background(), a.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
			s.note("delete refused: %v", err)
			return true
		}
		s.store().deleted[uid] = true
		deadline := time.Now().Add(2 * time.Second)
		for s.get(pvcKind, a.name) != nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	} else {
		s.record(fmt.Sprintf("another user creates a foreign PersistentVolumeClaim %s, beside %s", a.name, beside), s.heredoc("apply", u))
		s.topUpVolumes()
	}
	// (A client-side `kubectl apply` creates it: no field of it is applied server-side.)
	created := s.create(pvcKind, u, "kubectl-client-side-apply")
	if created == nil {
		// In use (terminating), or the operator was first with the WebApp's own.
		return true
	}
	s.foreign[created.GetUID()] = pvcKind.name + "/" + a.name
	s.t.Logf("claim actor: foreign PersistentVolumeClaim %s created beside %s", a.name, beside)
	if a.state == alive && a.claim == nil && s.chance(0.5) {
		// The WebApp adds its claim volume after the foreign claim exists (a step of its own).
		s.addClaimVolume(a, created)
	}
	return true
}

// --- helpers ---

// applyStorage writes WebApp a's claim volume c (nil: none) through v2 as the "storage" client, and records the
// generation it got; the server's refusal is returned (and noted), a.claim is then as it was. A volume is added by a
// server-side apply, as a client of v2 writes a field of its own. It is renamed or removed by a JSON merge patch (as
// `kubectl patch` sends), which replaces the lists whole: a server-side apply that drops an entry of spec.volumes
// (rename, removal) goes wrong while a v1 field manager ("user") co-owns the WebApp, because the API server prunes
// the entry in v1's form, where every v2-only field is one opaque conversionData string: the entry stays (an
// emptyDir's rename keeps both volumes, an apply of `spec: {}` removes nothing), or, with the old and new claim
// volumes both restored, the conversion drops the two claims and every mount (seed 1 met that: the claim was
// released on a rename). byApplyAlways sends every write by apply instead, to reproduce it.
func (s *seq) applyStorage(a *app, c *claimVol) error {
	sp := map[string]any{}
	var vols, mounts []any
	if c != nil {
		vols = []any{map[string]any{"name": c.name, "claim": map[string]any{"size": c.size, "accessMode": c.mode, "storageClassName": c.class,
			"deletionPolicy": string(c.policy)}}}
		mounts = []any{map[string]any{"name": c.name, "mountPath": claimMountPath}}
		if c.shared {
			vols = append(vols, map[string]any{"name": "team", "persistentVolumeClaim": map[string]any{"claimName": teamClaim}})
			mounts = append(mounts, map[string]any{"name": "team", "mountPath": "/srv/team"})
		}
		sp["volumes"], sp["container"] = vols, map[string]any{"volumeMounts": mounts}
	}
	var err error
	if a.claim == nil || byApplyAlways {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": webappv2.GroupVersion.String(), "kind": "WebApp",
			"metadata": map[string]any{"name": a.name}, "spec": sp}}
		s.note("%s", s.heredoc("apply --server-side --field-manager=storage", u))
		_, err = dyn.Resource(webAppV2GVR).Namespace(s.ns).Apply(context.Background(), a.name, u, metav1.ApplyOptions{FieldManager: "storage"})
	} else {
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"volumes": vols, "container": map[string]any{"volumeMounts": mounts}}})
		s.note("kubectl -n %s patch webapps.v2.example.com/%s --type=merge --field-manager=storage -p '%s'", s.ns, a.name, patch)
		_, err = dyn.Resource(webAppV2GVR).Namespace(s.ns).Patch(context.Background(), a.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "storage"})
	}
	if err != nil {
		s.note("refused: %v", err)
		return err
	}
	s.recordWrite(a, "")
	// The write is what the WebApp now says: its volumes and mounts are exactly those sent.
	if got := s.getV2(a.name); got != nil {
		var have []string
		for _, v := range got.Spec.Volumes {
			have = append(have, "volume "+v.Name)
		}
		for _, m := range got.Spec.Container.VolumeMounts {
			have = append(have, "mount "+m.Name+" "+m.MountPath)
		}
		var want []string
		for _, v := range vols {
			want = append(want, "volume "+v.(map[string]any)["name"].(string))
		}
		for _, m := range mounts {
			want = append(want, "mount "+m.(map[string]any)["name"].(string)+" "+m.(map[string]any)["mountPath"].(string))
		}
		if !slices.Equal(have, want) {
			s.fail("the storage client's write was accepted, but WebApp %s now has %q, not the %q it sent (generation %d):\n%s",
				a.name, have, want, got.Generation, toYAML(got))
		}
	}
	a.claim = c
	st := s.store()
	st.vols[a.uid] = c
	if c != nil && c.shared {
		if st.refs[a.uid] == nil {
			st.refs[a.uid] = map[string]bool{}
		}
		st.refs[a.uid][teamClaim] = true
	}
	return nil
}

// byApplyAlways: every write of the storage client is a server-side apply (see applyStorage).
var byApplyAlways = os.Getenv("WEBAPP_ACTIONS_STORAGE_BY_APPLY") != ""

// ensureTeamClaim creates the team's claim (not the WebApps', not of their names) if it does not exist.
func (s *seq) ensureTeamClaim() {
	if s.get(pvcKind, teamClaim) != nil {
		return
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": teamClaim},
		"spec": map[string]any{"accessModes": []any{"ReadWriteMany"}, "storageClassName": claimClass,
			"resources": map[string]any{"requests": map[string]any{"storage": claimSize}}}}}
	s.note("%s", s.heredoc("create", u))
	s.create(pvcKind, u, "kubectl-create")
}

// topUpVolumes keeps freeVolumes PersistentVolumes of the pool unbound (a volume a deleted claim was bound to is
// Released, and Retain keeps it so): hostPath, ReadWriteMany and ReadWriteOnce, of the test's class.
func (s *seq) topUpVolumes() {
	st := s.store()
	list, err := dyn.Resource(pvGVR).List(context.Background(), metav1.ListOptions{LabelSelector: poolLabel + "=" + s.ns})
	if err != nil {
		s.fail("listing the PersistentVolumes: %v", err)
	}
	free := 0
	for _, pv := range list.Items {
		if _, bound, _ := unstructured.NestedMap(pv.Object, "spec", "claimRef"); !bound && pv.GetDeletionTimestamp() == nil {
			free++
		}
	}
	for ; free < freeVolumes; free++ {
		st.volumes++
		name := fmt.Sprintf("%s-%d", s.ns, st.volumes)
		pv := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolume",
			"metadata": map[string]any{"name": name, "labels": map[string]any{poolLabel: s.ns}},
			"spec": map[string]any{"capacity": map[string]any{"storage": volumeCapacity}, "accessModes": []any{"ReadWriteMany", "ReadWriteOnce"},
				"storageClassName": claimClass, "persistentVolumeReclaimPolicy": "Retain", "hostPath": map[string]any{"path": "/tmp/" + name}}}}
		s.note("%s", strings.Replace(s.heredoc("create", pv), "kubectl -n "+s.ns+" ", "kubectl ", 1))
		if _, err := dyn.Resource(pvGVR).Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
			s.fail("creating PersistentVolume %s: %v", name, err)
		}
	}
}

// isForeign reports whether u is one of the objects the test created without our labels.
func (s *seq) isForeign(u metav1.Object) bool {
	_, ok := s.foreign[u.GetUID()]
	return ok
}

// hasClaimVolume reports whether the live WebApp of name has a claim volume.
func (s *seq) hasClaimVolume(name string) bool {
	return slices.ContainsFunc(s.apps, func(a *app) bool { return a.name == name && a.state == alive && a.claim != nil })
}

// claimBlocking lists what keeps the live WebApp of name from being Ready through its own claim: it is being
// deleted (a user deleted it while a scheduled pod used it) and a pod of the WebApp waits for it (the scheduler
// schedules no pod onto a claim being deleted).
func (s *seq) claimBlocking(name string) []string {
	if !s.hasClaimVolume(name) {
		return nil
	}
	pvc := s.get(pvcKind, name)
	if pvc == nil || pvc.GetDeletionTimestamp() == nil || s.isForeign(pvc) {
		return nil
	}
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, &client.ListOptions{Namespace: s.ns}); err != nil {
		s.fail("listing pods: %v", err)
	}
	for _, p := range pods.Items {
		if p.Labels[webappv2.LabelInstance] == name && p.Spec.NodeName == "" && p.DeletionTimestamp == nil &&
			metav1.GetControllerOfNoCopy(&p) != nil && slices.Contains(claimNamesOf(p.Spec.Volumes), name) {
			return []string{fmt.Sprintf("its claim %s is being deleted and pod %s waits for it", name, p.Name)}
		}
	}
	return nil
}

// claimNamesOf lists the claims volumes mount by name.
func claimNamesOf(vols []corev1.Volume) []string {
	var out []string
	for _, v := range vols {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// --- the invariants ---

// checkMounts: invariant 10, a claim mounted is the WebApp's or one it names. Every pod controlled (through its
// ReplicaSet) by a Deployment a WebApp controls, and every pod template of such a Deployment, mounts by
// persistentVolumeClaim.claimName only (a) a claim that WebApp controls, or one it released (no controller, our
// managed-by label), or (b) a claim the WebApp's spec names by volumes[].persistentVolumeClaim.claimName. A foreign
// claim mounted fails the test.
//
// A claim is named, not referenced by UID, so the check judges each name at one resourceVersion (one etcd orders
// every kind), with the claim of that name as it was stored then:
//   - a pod at its scheduling (its first version with a node): the kubelet mounts what the claim of the name is
//     then, and the scheduler does not schedule onto a claim that is missing, unbound or being deleted. After that
//     the name cannot change hands while the pod lives: the claim-protection finalizer keeps a claim a scheduled pod
//     uses until the pod is gone. A pod that names a claim deleted and re-created by someone else while it waited
//     unscheduled is judged when it is scheduled, against the new claim: that would be a foreign claim mounted.
//   - a Deployment's template when it first names the claim (its first version that does): that is the write
//     that decided to mount it. A later version that still names it changed something else, or is held as it is
//     (the operator holds the Deployment unchanged when the claim of its name is not the WebApp's); its pods are
//     judged at their scheduling. A template may name a claim not created yet (the claim's apply comes after the
//     Deployment's): nothing is mounted until it exists.
func (s *seq) checkMounts() {
	st := s.store()
	bound := min(st.synced, s.hist.seen(deploymentKind.name))
	deps := s.hist.all(deploymentKind.name)
	for ; st.depCursor < len(deps) && deps[st.depCursor].rv <= bound; st.depCursor++ {
		v := deps[st.depCursor]
		if v.deleted {
			continue
		}
		vols, _, _ := unstructured.NestedSlice(v.obj.Object, "spec", "template", "spec", "volumes")
		names := map[string]bool{}
		for _, n := range claimNamesOf(decodeVolumes(s, vols)) {
			names[n] = true
		}
		prev := st.named[v.obj.GetUID()]
		st.named[v.obj.GetUID()] = names
		ref := metav1.GetControllerOfNoCopy(v.obj)
		if ref == nil || ref.Kind != "WebApp" {
			continue
		}
		for n := range names {
			if !prev[n] {
				s.judgeMount(fmt.Sprintf("the pod template of Deployment %s", v.obj.GetName()), v, ref.UID, n)
			}
		}
	}
	pods := st.hist.all(podKind.name)
	for ; st.podCursor < len(pods) && pods[st.podCursor].rv <= bound; st.podCursor++ {
		v := pods[st.podCursor]
		if node, _, _ := unstructured.NestedString(v.obj.Object, "spec", "nodeName"); v.deleted || node == "" || st.judged[v.obj.GetUID()] {
			continue
		}
		st.judged[v.obj.GetUID()] = true
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(v.obj.Object, pod); err != nil {
			s.fail("decoding a pod version: %v", err)
		}
		w, dep := s.webAppOfPod(pod, v.rv)
		if w == "" {
			continue
		}
		for _, n := range claimNamesOf(pod.Spec.Volumes) {
			s.judgeMount(fmt.Sprintf("pod %s (of Deployment %s), scheduled on %s,", pod.Name, dep, pod.Spec.NodeName), v, w, n)
		}
	}
}

func decodeVolumes(s *seq, raw []any) []corev1.Volume {
	var out []corev1.Volume
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		v := corev1.Volume{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &v); err != nil {
			s.fail("decoding a volume: %v", err)
		}
		out = append(out, v)
	}
	return out
}

// webAppOfPod is the WebApp (UID) whose Deployment controlled pod's ReplicaSet at resourceVersion rv, and that
// Deployment's name; "" when there is none (a bare pod, a foreign Deployment's, an orphaned one's).
func (s *seq) webAppOfPod(pod *corev1.Pod, rv int64) (types.UID, string) {
	rsRef := metav1.GetControllerOfNoCopy(pod)
	if rsRef == nil || rsRef.Kind != "ReplicaSet" {
		return "", ""
	}
	rs := lastAt(s.store().hist.all(replicaSetKind.name), rsRef.UID, rv)
	if rs == nil {
		return "", ""
	}
	depRef := metav1.GetControllerOfNoCopy(rs)
	if depRef == nil || depRef.Kind != "Deployment" {
		return "", ""
	}
	dep := lastAt(s.hist.all(deploymentKind.name), depRef.UID, rv)
	if dep == nil {
		return "", ""
	}
	if ref := metav1.GetControllerOfNoCopy(dep); ref != nil && ref.Kind == "WebApp" {
		return ref.UID, dep.GetName()
	}
	return "", ""
}

// lastAt is the last version of the object of uid stored at or before rv (nil: none, or deleted).
func lastAt(vs []version, uid types.UID, rv int64) *unstructured.Unstructured {
	var out *unstructured.Unstructured
	for _, v := range vs {
		if v.rv > rv {
			break
		}
		if v.obj.GetUID() == uid {
			out = v.obj
			if v.deleted {
				out = nil
			}
		}
	}
	return out
}

// claimAt is the claim of name as stored at resourceVersion rv (nil: none then).
func (st *storage) claimAt(name string, rv int64) *unstructured.Unstructured {
	var out *unstructured.Unstructured
	for _, v := range st.hist.versions(pvcKind.name, name) {
		if v.rv > rv {
			break
		}
		out = v.obj
		if v.deleted {
			out = nil
		}
	}
	return out
}

// judgeMount fails the test unless the claim of name, as stored at v's resourceVersion, may be mounted by what
// (v, of the WebApp of uid w): the WebApp's, one it released, or one its spec names.
func (s *seq) judgeMount(what string, v version, w types.UID, name string) {
	st := s.store()
	pvc := st.claimAt(name, v.rv)
	if pvc == nil {
		// Nothing of that name to mount (yet): the scheduler waits for it.
		return
	}
	ref := metav1.GetControllerOfNoCopy(pvc)
	if (ref != nil && ref.UID == w) || (ref == nil && pvc.GetLabels()[webappv2.LabelManagedBy] == webappv2.ManagedBy) || st.refs[w][name] {
		return
	}
	whose := "not the WebApp's (controlled by " + fmt.Sprint(ref) + ")"
	if ref == nil {
		whose = "not the WebApp's (no controller, no managed-by label of ours)"
	}
	if what, ok := s.foreign[pvc.GetUID()]; ok {
		whose = "the foreign " + what + ", created by another user"
	}
	webapp := "(gone)"
	if u := s.get(webAppKind, s.nameOf(w)); u != nil {
		webapp = toYAML(s.getV2(u.GetName()))
	}
	s.fail("invariant 10 (a claim mounted is the WebApp's or one it names): %s at resourceVersion %d, of WebApp uid %s, mounts PersistentVolumeClaim %s, "+
		"which was then %s.\nIt:\n%s\nThe claim then (resourceVersion %s):\n%s\nThe WebApp now:\n%s",
		what, v.rv, w, name, whose, toYAML(v.obj.Object), pvc.GetResourceVersion(), toYAML(pvc.Object), webapp)
}

// nameOf is the name of the WebApp of uid the test created ("" if none).
func (s *seq) nameOf(uid types.UID) string {
	for _, v := range s.hist.all(webAppKind.name) {
		if v.obj.GetUID() == uid {
			return v.obj.GetName()
		}
	}
	return ""
}

// atRest reports whether the actors have stopped and every WebApp has converged or said why: check runs so once,
// at the end of quiesce, right after the step "the actors stop".
func (s *seq) atRest() bool {
	return len(s.steps) > 0 && s.steps[len(s.steps)-1].what == "the actors stop"
}

// checkClaimsAtRest: at rest, a WebApp with a claim volume beside a foreign claim of its name says why it cannot
// mount it (Ready False, reason ChildNotOwned, a message); one that says Ready has its own claim, bound (its pods run
// with it); and a WebApp without a claim volume controls no claim (it released the one it had).
func (s *seq) checkClaimsAtRest() {
	if !s.atRest() {
		return
	}
	for _, a := range s.apps {
		if a.state != alive {
			continue
		}
		app := &webappv1.WebApp{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: s.ns, Name: a.name}, app); err != nil {
			s.fail("reading WebApp %s: %v", a.name, err)
		}
		ready := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady)
		pvc := s.get(pvcKind, a.name)
		switch {
		case a.claim != nil && pvc != nil && s.isForeign(pvc):
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != webappv2.ReasonChildNotOwned || ready.Message == "" {
				s.fail("invariant 5 (a WebApp that is not Ready says why): at rest, WebApp %s has a claim volume beside the foreign PersistentVolumeClaim %s, "+
					"but its Ready is not False with reason %s and a message:\n%s\nThe claim:\n%s", a.name, a.name, webappv2.ReasonChildNotOwned, toYAML(app.Status), toYAML(pvc.Object))
			}
			s.t.Logf("claim actor: at rest, WebApp %s beside the foreign claim %s says Ready=%s %s %q", a.name, a.name, ready.Status, ready.Reason, ready.Message)
		case a.claim != nil && ready != nil && ready.Status == metav1.ConditionTrue:
			if pvc == nil || !controlledBy(pvc, a.uid) || pvc.Object["status"].(map[string]any)["phase"] != string(corev1.ClaimBound) {
				s.fail("at rest, WebApp %s with %s is Ready, but the claim of its name is not its own and bound:\n%v", a.name, a.claim, pvcYAML(pvc))
			}
			volume, _, _ := unstructured.NestedString(pvc.Object, "spec", "volumeName")
			s.t.Logf("claim actor: at rest, WebApp %s is Ready with its claim %s bound to PersistentVolume %s, mounted by %d running pods",
				a.name, a.name, volume, s.runningPodsWith(a.name))
		case a.claim == nil && pvc != nil && controlledBy(pvc, a.uid):
			s.fail("at rest, WebApp %s has no claim volume, but still controls the claim of its name (it must be released):\n%s", a.name, toYAML(pvc.Object))
		}
	}
}

func pvcYAML(u *unstructured.Unstructured) string {
	if u == nil {
		return "(none)"
	}
	return toYAML(u.Object)
}

// runningPodsWith counts the running pods that mount the claim of name.
func (s *seq) runningPodsWith(name string) int {
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, &client.ListOptions{Namespace: s.ns}); err != nil {
		s.fail("listing pods: %v", err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && slices.Contains(claimNamesOf(p.Spec.Volumes), name) {
			n++
		}
	}
	return n
}

// claimKeptOrGone: with a claim volume, a WebApp's claim is kept when the WebApp is deleted (released: no owner
// reference to it) unless claim.deletionPolicy is Delete (with the Delete policy: then it goes with the WebApp). A
// claim it released before (its volume removed) is kept whatever happens. d's WebApp is gone and the garbage
// collector has passed (its sentinel is gone).
func (s *seq) claimKeptOrGone(d *deletion) {
	st := s.store()
	var claim types.UID
	for _, v := range st.hist.versions(pvcKind.name, d.name) {
		if !v.deleted && controlledBy(v.obj, d.uid) {
			claim = v.obj.GetUID()
		}
	}
	if claim == "" {
		return // it never had a claim of its own
	}
	finalizer := false
	for _, v := range s.hist.versions(webAppKind.name, d.name) {
		if v.obj.GetUID() == d.uid && v.obj.GetDeletionTimestamp() != nil && slices.Contains(v.obj.GetFinalizers(), webappv1.Finalizer) {
			finalizer = true
		}
	}
	vol := st.vols[d.uid]
	kept := vol == nil || (finalizer && (d.release || vol.policy != webappv2.ClaimDelete))
	what := fmt.Sprintf("WebApp %s (uid %s, deleted at step %d, its claim volume then: %v, our finalizer on it: %v)", d.name, d.uid, d.step, vol, finalizer)
	if !kept {
		testutil.Eventually(s.reporting(), convergeTimeout, "a claim with deletionPolicy Delete goes with its WebApp: "+what, func(context.Context) error {
			if u := s.get(pvcKind, d.name); u != nil && u.GetUID() == claim {
				return fmt.Errorf("PersistentVolumeClaim %s (uid %s) is still there:\n%s", d.name, claim, toYAML(u.Object))
			}
			return nil
		})
		s.t.Logf("claim actor: WebApp %s's claim (deletionPolicy Delete) went with it", d.name)
		return
	}
	testutil.Consistently(s.reporting(), time.Second, "a claim is kept when its WebApp is deleted (released, with its data): "+what, func(context.Context) error {
		if st.deleted[claim] {
			return nil // a user deleted it
		}
		u := s.get(pvcKind, d.name)
		if u == nil || u.GetUID() != claim {
			return fmt.Errorf("PersistentVolumeClaim %s (uid %s) was deleted; its last version:\n%s", d.name, claim, s.lastClaimVersion(d.name, claim))
		}
		if slices.ContainsFunc(u.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == d.uid }) {
			return fmt.Errorf("PersistentVolumeClaim %s still has an ownerReference to the deleted WebApp:\n%s", d.name, toYAML(u.Object))
		}
		return nil
	})
	s.t.Logf("claim actor: WebApp %s's claim was kept on its deletion (claim volume %v)", d.name, vol)
}

func (s *seq) lastClaimVersion(name string, uid types.UID) string {
	vs := s.store().hist.versions(pvcKind.name, name)
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].obj.GetUID() == uid {
			return toYAML(vs[i].obj.Object)
		}
	}
	return "(never recorded)"
}
