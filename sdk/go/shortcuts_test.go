package orchard

import "testing"

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
