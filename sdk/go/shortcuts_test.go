package orchard

import (
	"strings"
	"testing"
)

// declaring is an actuator of PowerDNS TSIG keys' kind: the system refuses a name that exists
// and deletes at once.
type declaring struct{ fake }

func (declaring) Shortcuts() Shortcuts {
	return Shortcuts{CreateRefusesDuplicates: true, DeleteIsSynchronous: true}
}

func TestAnActuatorDeclaresNoShortcutUnlessItImplementsShortcutDeclarer(t *testing.T) {
	if got := NewRaw[spec, filter, state](&fake{}).Shortcuts(); got != (Shortcuts{}) {
		t.Fatalf("an actuator without Shortcuts declared %+v", got)
	}
	want := Shortcuts{CreateRefusesDuplicates: true, DeleteIsSynchronous: true}
	if got := NewRaw[spec, filter, state](&declaring{}).Shortcuts(); got != want {
		t.Fatalf("declared %+v, want %+v", got, want)
	}
}

// byName deletes by id: it records which of its deletes ran.
type byName struct {
	fake
	deleted []string
}

func (*byName) Shortcuts() Shortcuts {
	return Shortcuts{DeleteIsSynchronous: true, DeleteByID: true}
}

func (b *byName) Delete(_ *Object[spec], res *Resource[state]) (Status, error) {
	b.deleted = append(b.deleted, "Delete "+res.ID)
	return Done(), nil
}

func (b *byName) DeleteByID(_ *Object[spec], id string) (Status, error) {
	b.deleted = append(b.deleted, "DeleteByID "+id)
	return Done(), nil
}

func TestADeleteWithoutStateGoesToDeleteByIDWhenTheActuatorDeclaresIt(t *testing.T) {
	a := &byName{}
	r := NewRaw[spec, filter, state](a)
	obj := object(`{"name":"a"}`)
	if s := r.Delete(obj, &RawResource{ID: "a.", State: "null"}); !s.IsDone() {
		t.Fatalf("by id: %+v", s)
	}
	// A resource the host read (found by adoption) still goes to Delete, typed.
	if s := r.Delete(obj, &RawResource{ID: "b.", State: `{"name":"b"}`}); !s.IsDone() {
		t.Fatalf("read: %+v", s)
	}
	if got := strings.Join(a.deleted, ", "); got != "DeleteByID a., Delete b." {
		t.Fatalf("ran %q", got)
	}
}

// declaresOnly declares DeleteByID without implementing IDDeleter.
type declaresOnly struct{ fake }

func (declaresOnly) Shortcuts() Shortcuts { return Shortcuts{DeleteByID: true} }

func TestAnActuatorThatDeclaresDeleteByIDWithoutImplementingItFailsNamingIt(t *testing.T) {
	r := NewRaw[spec, filter, state](&declaresOnly{})
	s := r.Delete(object(`{"name":"a"}`), &RawResource{ID: "a.", State: "null"})
	if s.Failure == nil || !strings.Contains(s.Failure.Error(), "does not implement DeleteByID (asked to delete a.)") {
		t.Fatalf("%+v", s)
	}
}
