package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The wire's enums as this package's, without breakerd. */
class ProtosTest {

  /**
   * Every reason breakerd can send has its own {@link RejectReason}: a value added to the proto
   * and not mapped would read as NONE, a refusal without a reason.
   */
  @Test
  void everyRejectReasonOfTheWireHasItsOwnValue() {
    Set<RejectReason> seen = EnumSet.noneOf(RejectReason.class);
    for (io.breakerd.v1.RejectReason r : io.breakerd.v1.RejectReason.values()) {
      if (r == io.breakerd.v1.RejectReason.UNRECOGNIZED
          || r == io.breakerd.v1.RejectReason.REJECT_REASON_UNSPECIFIED) {
        continue;
      }
      RejectReason mine = Protos.reason(r);
      assertNotEquals(RejectReason.NONE, mine, r + " is not mapped");
      assertEquals(r.name(), "REJECT_REASON_" + mine.name());
      seen.add(mine);
    }
    assertEquals(EnumSet.complementOf(EnumSet.of(RejectReason.NONE)), seen);
    assertEquals(RejectReason.RAMP, Protos.reason(io.breakerd.v1.RejectReason.REJECT_REASON_RAMP));
    assertEquals(RejectReason.NONE,
        Protos.reason(io.breakerd.v1.RejectReason.REJECT_REASON_UNSPECIFIED));
  }
}
