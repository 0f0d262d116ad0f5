-- depends: 0005_embedding_input_hash
-- A request id is bound to its member, its operation and a fingerprint of the request
-- (store_service/records/idempotency.py): request_id now holds the client's id as sent, request_operation
-- the operation (remember, derive, supersede) and request_fingerprint the sha256 of the request's
-- canonical encoding (NULL once the memory is forgotten).
ALTER TABLE memory ADD COLUMN request_operation text
        CHECK (request_operation IN ('remember', 'derive', 'supersede')),
    ADD COLUMN request_fingerprint bytea;

-- Rows written before this migration stored '<operation>:<id>', or 'supersede:<target>:<id>' with
-- the target as the client sent it (a UUID in any form uuid.UUID parses: 'urn:uuid:' and 'uuid:'
-- prefixes may add colons). They become the id as sent with its operation and no fingerprint: such
-- an id can no longer be matched to its first request, so any reuse is refused with ALREADY_EXISTS
-- and never answered with a result that may belong to another request. One member may have used
-- one id for several operations (the old key kept them apart); the oldest such memory keeps the id,
-- the others lose it, so a reuse meets the oldest and is refused the same way.
CREATE TEMPORARY TABLE legacy_request_key ON COMMIT DROP AS
SELECT id, created_by, created_at, split_part(request_id, ':', 1) AS operation,
       CASE split_part(request_id, ':', 1)
            WHEN 'supersede' THEN regexp_replace(request_id, '^supersede:(?:(?:urn|uuid):)*[^:]*:', '')
            ELSE substr(request_id, length(split_part(request_id, ':', 1)) + 2)
       END AS raw_id
  FROM memory
 WHERE request_id IS NOT NULL;

UPDATE memory SET request_id = NULL WHERE request_id IS NOT NULL;

UPDATE memory m
   SET request_id = k.raw_id, request_operation = k.operation
  FROM (SELECT id, raw_id, operation,
               row_number() OVER (PARTITION BY created_by, raw_id ORDER BY created_at, id) AS nth
          FROM legacy_request_key
         WHERE operation IN ('remember', 'derive', 'supersede') AND raw_id <> '') k
 WHERE m.id = k.id AND k.nth = 1;
