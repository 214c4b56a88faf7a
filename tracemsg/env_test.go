package tracemsg

import (
	"testing"

	"github.com/verdryx/verdryx/testkit/jstest"
)

func TestMain(m *testing.M) { jstest.VerifyMain(m) }
