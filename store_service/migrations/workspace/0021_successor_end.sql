-- depends: 0020_memory_time
-- A superseded memory's end follows its successor's start only when everyone who may read the memory
-- may read the successor (docs/time.md, "Validity"): the same purpose, an audience no narrower, and no
-- derived_from source the memory lacks. Otherwise its end is when it was superseded, so a reader who
-- cannot read the successor learns nothing of the successor's claim. end_follows_successor records
-- which rule set the end; a Correct of the successor's start moves only ends that follow it.
ALTER TABLE memory ADD COLUMN end_follows_successor boolean NOT NULL DEFAULT false;
UPDATE memory m
   SET end_follows_successor = true
  FROM memory s
 WHERE s.id = m.superseded_by_id
   AND s.purpose = m.purpose
   AND (s.audience_member_id IS NULL OR s.audience_member_id IS NOT DISTINCT FROM m.audience_member_id)
   AND NOT EXISTS (SELECT 1 FROM memory_link l
                    WHERE l.memory_id = s.id AND l.link_type = 'derived_from'
                      AND NOT EXISTS (SELECT 1 FROM memory_link k
                                       WHERE k.memory_id = m.id AND k.link_type = 'derived_from'
                                         AND k.target_memory_id = l.target_memory_id));
UPDATE memory m
   SET valid_until = greatest(m.retired_at, m.valid_from)
 WHERE m.superseded_by_id IS NOT NULL AND NOT m.end_follows_successor;
-- Memories whose successor was forgotten take its place again (store_service/data_steps.py).
INSERT INTO data_step_due (step) VALUES ('restore_predecessors') ON CONFLICT DO NOTHING;
