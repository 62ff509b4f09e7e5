package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// behind says whether the cache may not yet show our own last write of an object: ensure then reads the server, so
// it must be true only while the cache lags, never for good.
func TestBehindOnlyWhileTheCacheLagsOurWrite(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	obj := func(uid, rv string) client.Object {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: types.UID(uid), ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name   string
		record func(m *memory)
		cached client.Object
		want   bool
	}{
		{"nothing written", func(*memory) {}, obj("a", "5"), false},
		{"the cache shows our write", func(m *memory) { m.Remember("Service", key, obj("a", "10"), [32]byte{}) }, obj("a", "10"), false},
		{"the cache is past our write", func(m *memory) { m.Remember("Service", key, obj("a", "10"), [32]byte{}) }, obj("a", "12"), false},
		{"the cache is before our write", func(m *memory) { m.Remember("Service", key, obj("a", "10"), [32]byte{}) }, obj("a", "5"), true},
		{"a replacement made after our write", func(m *memory) { m.Remember("Service", key, obj("a", "10"), [32]byte{}) }, obj("b", "12"), false},
		{"an older object than the one we wrote", func(m *memory) { m.Remember("Service", key, obj("a", "10"), [32]byte{}) }, obj("b", "5"), true},
		{"a refused create (nothing written)", func(m *memory) { m.Refused("Service", key, nil, [32]byte{}, errors.New("refused")) }, obj("b", "5"), false},
		{"a refused apply of the object the cache shows", func(m *memory) { m.Refused("Service", key, obj("a", "7"), [32]byte{}, errors.New("refused")) }, obj("a", "7"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m memory
			tc.record(&m)
			if got := m.Behind("Service", key, tc.cached); got != tc.want {
				t.Errorf("behind = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFailingIn: the failing index follows each WebApp's last reconcile, by namespace, and forgets the deleted.
func TestFailingIn(t *testing.T) {
	m := &memory{}
	a, b, c := types.NamespacedName{Namespace: "x", Name: "a"}, types.NamespacedName{Namespace: "x", Name: "b"}, types.NamespacedName{Namespace: "y", Name: "c"}
	failed := errors.New("quota exceeded")
	steps := []struct {
		do     func()
		x, y   []types.NamespacedName
		record string
	}{
		{do: func() { m.settle(a, "fp", failed) }, x: []types.NamespacedName{a}},
		{do: func() { m.settle(b, "", failed) }, x: []types.NamespacedName{a, b}},
		{do: func() { m.settle(c, "fp", failed) }, x: []types.NamespacedName{a, b}, y: []types.NamespacedName{c}},
		{do: func() { m.settle(a, "fp2", nil) }, x: []types.NamespacedName{b}, y: []types.NamespacedName{c}},
		{do: func() { m.settle(b, "", nil) }, y: []types.NamespacedName{c}},
		{do: func() { m.forget(c) }},
	}
	for i, s := range steps {
		s.do()
		for ns, want := range map[string][]types.NamespacedName{"x": s.x, "y": s.y} {
			got := m.failingIn(ns)
			slices.SortFunc(got, func(p, q types.NamespacedName) int { return strings.Compare(p.Name, q.Name) })
			if !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Errorf("step %d: failing in %s: %v, want %v", i, ns, got, want)
			}
		}
	}
	if len(m.failing) != 0 {
		t.Errorf("the index keeps %v after every WebApp recovered or went", m.failing)
	}
}
