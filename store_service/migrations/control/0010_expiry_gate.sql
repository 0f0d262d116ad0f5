-- depends: 0009_context_bundle
-- The expiry gate (store_service/access/expiry.py), off by default: NULL is off; N hides from recall and the
-- context bundle every memory not updated for N days (1..3650, store_service.access.expiry.MAX_EXPIRY_DAYS).
ALTER TABLE workspace ADD COLUMN expiry_days integer CHECK (expiry_days BETWEEN 1 AND 3650);
-- When AdminService.RemoveMember removed the member (store_service/control/members.py); NULL for a member.
-- A removed member keeps its row: the workspace memories it wrote still name it as created_by.
ALTER TABLE member ADD COLUMN removed_at timestamptz;
