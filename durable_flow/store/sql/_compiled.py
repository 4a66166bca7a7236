"""Generated from _tables.py by `python -m durable_flow.store.sql._queries`; do not edit."""

# ruff: noqa
from typing import Any

DIGEST = 'f06ac26ef80bd8396b217f6dcaaf7b400d1feea1cacc85fbf79ed0fe0fed2a7a'

STATEMENTS: dict[str, Any] = {'postgresql+returning': {'chunk_delete_thread': ('DELETE FROM log_chunks WHERE log_chunks.run_id '
                                                  '= $1::VARCHAR AND log_chunks.thread = '
                                                  '$2::VARCHAR RETURNING 1',
                                                  ('run_id', 'thread'),
                                                  {},
                                                  ()),
                          'chunk_insert': ('INSERT INTO log_chunks (run_id, thread, seq, channel, '
                                           'data) VALUES ($1::VARCHAR, $2::VARCHAR, $3::INTEGER, '
                                           '$4::VARCHAR, $5::BYTEA) RETURNING 1',
                                           ('run_id', 'thread', 'seq', 'channel', 'data'),
                                           {},
                                           ()),
                          'chunk_upto': ('SELECT log_chunks.channel, log_chunks.data \n'
                                         'FROM log_chunks \n'
                                         'WHERE log_chunks.run_id = $1::VARCHAR AND '
                                         'log_chunks.thread = $2::VARCHAR AND log_chunks.seq <= '
                                         '$3::INTEGER ORDER BY log_chunks.seq, log_chunks.channel',
                                         ('run_id', 'thread', 'upto'),
                                         {},
                                         ('channel', 'data')),
                          'cp_delete': ('DELETE FROM checkpoints WHERE checkpoints.run_id = '
                                        '$1::VARCHAR AND checkpoints.checkpoint_id = $2::VARCHAR '
                                        'RETURNING 1',
                                        ('run_id', 'checkpoint_id'),
                                        {},
                                        ()),
                          'cp_get': ('SELECT checkpoints.run_id, checkpoints.checkpoint_id, '
                                     'checkpoints.thread, checkpoints.namespace, '
                                     'checkpoints.parent_id, checkpoints.seq, '
                                     'checkpoints.superstep, checkpoints.created_at, '
                                     'checkpoints.status, checkpoints.source, checkpoints.nodes, '
                                     'checkpoints.routing_reason, checkpoints.next_tasks, '
                                     'checkpoints.joins, checkpoints.value_versions, '
                                     'checkpoints.log_lengths, checkpoints.error, '
                                     'checkpoints.size \n'
                                     'FROM checkpoints \n'
                                     'WHERE checkpoints.run_id = $1::VARCHAR AND '
                                     'checkpoints.checkpoint_id = $2::VARCHAR',
                                     ('run_id', 'checkpoint_id'),
                                     {},
                                     ('run_id',
                                      'checkpoint_id',
                                      'thread',
                                      'namespace',
                                      'parent_id',
                                      'seq',
                                      'superstep',
                                      'created_at',
                                      'status',
                                      'source',
                                      'nodes',
                                      'routing_reason',
                                      'next_tasks',
                                      'joins',
                                      'value_versions',
                                      'log_lengths',
                                      'error',
                                      'size')),
                          'cp_head': ('SELECT checkpoints.run_id, checkpoints.checkpoint_id, '
                                      'checkpoints.thread, checkpoints.namespace, '
                                      'checkpoints.parent_id, checkpoints.seq, '
                                      'checkpoints.superstep, checkpoints.created_at, '
                                      'checkpoints.status, checkpoints.source, checkpoints.nodes, '
                                      'checkpoints.routing_reason, checkpoints.next_tasks, '
                                      'checkpoints.joins, checkpoints.value_versions, '
                                      'checkpoints.log_lengths, checkpoints.error, '
                                      'checkpoints.size \n'
                                      'FROM checkpoints \n'
                                      'WHERE checkpoints.run_id = $1::VARCHAR AND '
                                      'checkpoints.thread = $2::VARCHAR ORDER BY checkpoints.seq '
                                      'DESC \n'
                                      ' LIMIT $3::INTEGER',
                                      ('run_id', 'thread', 'param_1'),
                                      {'param_1': 1},
                                      ('run_id',
                                       'checkpoint_id',
                                       'thread',
                                       'namespace',
                                       'parent_id',
                                       'seq',
                                       'superstep',
                                       'created_at',
                                       'status',
                                       'source',
                                       'nodes',
                                       'routing_reason',
                                       'next_tasks',
                                       'joins',
                                       'value_versions',
                                       'log_lengths',
                                       'error',
                                       'size')),
                          'cp_insert': ('INSERT INTO checkpoints (run_id, checkpoint_id, thread, '
                                        'namespace, parent_id, seq, superstep, created_at, status, '
                                        'source, nodes, routing_reason, next_tasks, joins, '
                                        'value_versions, log_lengths, error, size) VALUES '
                                        '($1::VARCHAR, $2::VARCHAR, $3::VARCHAR, $4::VARCHAR, '
                                        '$5::VARCHAR, $6::INTEGER, $7::INTEGER, $8::BIGINT, '
                                        '$9::VARCHAR, $10::VARCHAR, $11::VARCHAR, $12::VARCHAR, '
                                        '$13::VARCHAR, $14::VARCHAR, $15::VARCHAR, $16::VARCHAR, '
                                        '$17::VARCHAR, $18::INTEGER) RETURNING 1',
                                        ('run_id',
                                         'checkpoint_id',
                                         'thread',
                                         'namespace',
                                         'parent_id',
                                         'seq',
                                         'superstep',
                                         'created_at',
                                         'status',
                                         'source',
                                         'nodes',
                                         'routing_reason',
                                         'next_tasks',
                                         'joins',
                                         'value_versions',
                                         'log_lengths',
                                         'error',
                                         'size'),
                                        {},
                                        ()),
                          'cp_list': {(False, False): ('SELECT checkpoints.run_id, '
                                                       'checkpoints.checkpoint_id, '
                                                       'checkpoints.thread, checkpoints.namespace, '
                                                       'checkpoints.parent_id, checkpoints.seq, '
                                                       'checkpoints.superstep, '
                                                       'checkpoints.created_at, '
                                                       'checkpoints.status, checkpoints.source, '
                                                       'checkpoints.nodes, '
                                                       'checkpoints.routing_reason, '
                                                       'checkpoints.next_tasks, checkpoints.joins, '
                                                       'checkpoints.value_versions, '
                                                       'checkpoints.log_lengths, '
                                                       'checkpoints.error, checkpoints.size \n'
                                                       'FROM checkpoints \n'
                                                       'WHERE checkpoints.run_id = $1::VARCHAR '
                                                       'ORDER BY checkpoints.checkpoint_id DESC',
                                                       ('run_id',),
                                                       {},
                                                       ('run_id',
                                                        'checkpoint_id',
                                                        'thread',
                                                        'namespace',
                                                        'parent_id',
                                                        'seq',
                                                        'superstep',
                                                        'created_at',
                                                        'status',
                                                        'source',
                                                        'nodes',
                                                        'routing_reason',
                                                        'next_tasks',
                                                        'joins',
                                                        'value_versions',
                                                        'log_lengths',
                                                        'error',
                                                        'size')),
                                      (False, True): ('SELECT checkpoints.run_id, '
                                                      'checkpoints.checkpoint_id, '
                                                      'checkpoints.thread, checkpoints.namespace, '
                                                      'checkpoints.parent_id, checkpoints.seq, '
                                                      'checkpoints.superstep, '
                                                      'checkpoints.created_at, checkpoints.status, '
                                                      'checkpoints.source, checkpoints.nodes, '
                                                      'checkpoints.routing_reason, '
                                                      'checkpoints.next_tasks, checkpoints.joins, '
                                                      'checkpoints.value_versions, '
                                                      'checkpoints.log_lengths, checkpoints.error, '
                                                      'checkpoints.size \n'
                                                      'FROM checkpoints \n'
                                                      'WHERE checkpoints.run_id = $1::VARCHAR AND '
                                                      'checkpoints.thread = $2::VARCHAR ORDER BY '
                                                      'checkpoints.checkpoint_id DESC',
                                                      ('run_id', 'thread'),
                                                      {},
                                                      ('run_id',
                                                       'checkpoint_id',
                                                       'thread',
                                                       'namespace',
                                                       'parent_id',
                                                       'seq',
                                                       'superstep',
                                                       'created_at',
                                                       'status',
                                                       'source',
                                                       'nodes',
                                                       'routing_reason',
                                                       'next_tasks',
                                                       'joins',
                                                       'value_versions',
                                                       'log_lengths',
                                                       'error',
                                                       'size')),
                                      (True, False): ('SELECT checkpoints.run_id, '
                                                      'checkpoints.checkpoint_id, '
                                                      'checkpoints.thread, checkpoints.namespace, '
                                                      'checkpoints.parent_id, checkpoints.seq, '
                                                      'checkpoints.superstep, '
                                                      'checkpoints.created_at, checkpoints.status, '
                                                      'checkpoints.source, checkpoints.nodes, '
                                                      'checkpoints.routing_reason, '
                                                      'checkpoints.next_tasks, checkpoints.joins, '
                                                      'checkpoints.value_versions, '
                                                      'checkpoints.log_lengths, checkpoints.error, '
                                                      'checkpoints.size \n'
                                                      'FROM checkpoints \n'
                                                      'WHERE checkpoints.run_id = $1::VARCHAR AND '
                                                      'checkpoints.namespace = $2::VARCHAR ORDER '
                                                      'BY checkpoints.checkpoint_id DESC',
                                                      ('run_id', 'namespace'),
                                                      {},
                                                      ('run_id',
                                                       'checkpoint_id',
                                                       'thread',
                                                       'namespace',
                                                       'parent_id',
                                                       'seq',
                                                       'superstep',
                                                       'created_at',
                                                       'status',
                                                       'source',
                                                       'nodes',
                                                       'routing_reason',
                                                       'next_tasks',
                                                       'joins',
                                                       'value_versions',
                                                       'log_lengths',
                                                       'error',
                                                       'size')),
                                      (True, True): ('SELECT checkpoints.run_id, '
                                                     'checkpoints.checkpoint_id, '
                                                     'checkpoints.thread, checkpoints.namespace, '
                                                     'checkpoints.parent_id, checkpoints.seq, '
                                                     'checkpoints.superstep, '
                                                     'checkpoints.created_at, checkpoints.status, '
                                                     'checkpoints.source, checkpoints.nodes, '
                                                     'checkpoints.routing_reason, '
                                                     'checkpoints.next_tasks, checkpoints.joins, '
                                                     'checkpoints.value_versions, '
                                                     'checkpoints.log_lengths, checkpoints.error, '
                                                     'checkpoints.size \n'
                                                     'FROM checkpoints \n'
                                                     'WHERE checkpoints.run_id = $1::VARCHAR AND '
                                                     'checkpoints.namespace = $2::VARCHAR AND '
                                                     'checkpoints.thread = $3::VARCHAR ORDER BY '
                                                     'checkpoints.checkpoint_id DESC',
                                                     ('run_id', 'namespace', 'thread'),
                                                     {},
                                                     ('run_id',
                                                      'checkpoint_id',
                                                      'thread',
                                                      'namespace',
                                                      'parent_id',
                                                      'seq',
                                                      'superstep',
                                                      'created_at',
                                                      'status',
                                                      'source',
                                                      'nodes',
                                                      'routing_reason',
                                                      'next_tasks',
                                                      'joins',
                                                      'value_versions',
                                                      'log_lengths',
                                                      'error',
                                                      'size'))},
                          'cp_mark': ('UPDATE checkpoints SET status=$1::VARCHAR, '
                                      'error=$2::VARCHAR WHERE checkpoints.run_id = $3::VARCHAR '
                                      'AND checkpoints.checkpoint_id = $4::VARCHAR RETURNING 1',
                                      ('new_status', 'new_error', 'run_id', 'checkpoint_id'),
                                      {},
                                      ()),
                          'cp_scan': {(False,): ('SELECT checkpoints.run_id, checkpoints.thread, '
                                                 'checkpoints.checkpoint_id, '
                                                 'checkpoints.created_at, checkpoints.status \n'
                                                 'FROM checkpoints JOIN runs ON runs.run_id = '
                                                 'checkpoints.run_id ORDER BY checkpoints.run_id, '
                                                 'checkpoints.thread, checkpoints.seq FOR UPDATE '
                                                 'OF runs',
                                                 (),
                                                 {},
                                                 ('run_id',
                                                  'thread',
                                                  'checkpoint_id',
                                                  'created_at',
                                                  'status')),
                                      (True,): ('SELECT checkpoints.run_id, checkpoints.thread, '
                                                'checkpoints.checkpoint_id, '
                                                'checkpoints.created_at, checkpoints.status \n'
                                                'FROM checkpoints JOIN runs ON runs.run_id = '
                                                'checkpoints.run_id \n'
                                                'WHERE checkpoints.run_id = $1::VARCHAR ORDER BY '
                                                'checkpoints.run_id, checkpoints.thread, '
                                                'checkpoints.seq FOR UPDATE OF runs',
                                                ('run_id',),
                                                {},
                                                ('run_id',
                                                 'thread',
                                                 'checkpoint_id',
                                                 'created_at',
                                                 'status'))},
                          'cp_versions': ('SELECT checkpoints.value_versions \n'
                                          'FROM checkpoints \n'
                                          'WHERE checkpoints.run_id = $1::VARCHAR AND '
                                          'checkpoints.thread = $2::VARCHAR',
                                          ('run_id', 'thread'),
                                          {},
                                          ('value_versions',)),
                          'lease_check': ('SELECT runs.run_id \n'
                                          'FROM runs \n'
                                          'WHERE runs.run_id = $1::VARCHAR AND runs.lease_epoch = '
                                          '$2::INTEGER AND runs.lease_owner = $3::VARCHAR FOR '
                                          'UPDATE',
                                          ('run_id', 'epoch', 'owner'),
                                          {},
                                          ('run_id',)),
                          'lease_release': ('UPDATE runs SET lease_owner=$1::VARCHAR, '
                                            'lease_expires_at=$2::BIGINT WHERE runs.run_id = '
                                            '$3::VARCHAR AND runs.lease_epoch = $4::INTEGER AND '
                                            'runs.lease_owner = $5::VARCHAR RETURNING 1',
                                            ('lease_owner',
                                             'lease_expires_at',
                                             'run_id',
                                             'epoch',
                                             'owner'),
                                            {'lease_expires_at': None, 'lease_owner': None},
                                            ()),
                          'lease_release_requeue': ('UPDATE runs SET status=CASE WHEN (runs.status '
                                                    '= $1::VARCHAR) THEN $2::VARCHAR ELSE '
                                                    'runs.status END, updated_at=$3::BIGINT, '
                                                    'lease_owner=$4::VARCHAR, '
                                                    'lease_expires_at=$5::BIGINT WHERE runs.run_id '
                                                    '= $6::VARCHAR AND runs.lease_epoch = '
                                                    '$7::INTEGER AND runs.lease_owner = '
                                                    '$8::VARCHAR RETURNING 1',
                                                    ('status_1',
                                                     'param_1',
                                                     'now',
                                                     'lease_owner',
                                                     'lease_expires_at',
                                                     'run_id',
                                                     'epoch',
                                                     'owner'),
                                                    {'lease_expires_at': None,
                                                     'lease_owner': None,
                                                     'param_1': 'queued',
                                                     'status_1': 'running'},
                                                    ()),
                          'lease_renew': ('UPDATE runs SET lease_expires_at=$1::BIGINT WHERE '
                                          'runs.run_id = $2::VARCHAR AND runs.lease_epoch = '
                                          '$3::INTEGER AND runs.lease_owner = $4::VARCHAR '
                                          'RETURNING 1',
                                          ('expires', 'run_id', 'epoch', 'owner'),
                                          {},
                                          ()),
                          'req_anchors': {(False,): ('SELECT DISTINCT requests.run_id, '
                                                     'requests.checkpoint_id \n'
                                                     'FROM requests \n'
                                                     'WHERE requests.answer IS NULL',
                                                     (),
                                                     {},
                                                     ('run_id', 'checkpoint_id')),
                                          (True,): ('SELECT DISTINCT requests.run_id, '
                                                    'requests.checkpoint_id \n'
                                                    'FROM requests \n'
                                                    'WHERE requests.answer IS NULL AND '
                                                    'requests.run_id = $1::VARCHAR',
                                                    ('run_id',),
                                                    {},
                                                    ('run_id', 'checkpoint_id'))},
                          'req_answer': ('UPDATE requests SET answer=$1::BYTEA, '
                                         'answered_at=$2::BIGINT WHERE requests.run_id = '
                                         '$3::VARCHAR AND requests.request_id = $4::VARCHAR '
                                         'RETURNING 1',
                                         ('new_answer', 'now', 'run_id', 'request_id'),
                                         {},
                                         ()),
                          'req_delete': ('DELETE FROM requests WHERE requests.run_id = $1::VARCHAR '
                                         'AND requests.checkpoint_id = $2::VARCHAR RETURNING 1',
                                         ('run_id', 'checkpoint_id'),
                                         {},
                                         ()),
                          'req_drop_open': ('DELETE FROM requests WHERE requests.run_id = '
                                            '$1::VARCHAR AND requests.answer IS NULL RETURNING 1',
                                            ('run_id',),
                                            {},
                                            ()),
                          'req_get_answer': ('SELECT requests.answer \n'
                                             'FROM requests \n'
                                             'WHERE requests.run_id = $1::VARCHAR AND '
                                             'requests.request_id = $2::VARCHAR',
                                             ('run_id', 'request_id'),
                                             {},
                                             ('answer',)),
                          'req_inbox': {(False,): ('SELECT requests.run_id, requests.request_id, '
                                                   'requests.workflow_name, requests.thread, '
                                                   'requests.checkpoint_id, requests.node, '
                                                   'requests.request_index, requests.payload, '
                                                   'requests.response_schema, requests.created_at, '
                                                   'requests.answer, requests.answered_at \n'
                                                   'FROM requests \n'
                                                   'WHERE requests.answer IS NULL ORDER BY '
                                                   'requests.created_at, requests.run_id, '
                                                   'requests.request_id',
                                                   (),
                                                   {},
                                                   ('run_id',
                                                    'request_id',
                                                    'workflow_name',
                                                    'thread',
                                                    'checkpoint_id',
                                                    'node',
                                                    'request_index',
                                                    'payload',
                                                    'response_schema',
                                                    'created_at',
                                                    'answer',
                                                    'answered_at')),
                                        (True,): ('SELECT requests.run_id, requests.request_id, '
                                                  'requests.workflow_name, requests.thread, '
                                                  'requests.checkpoint_id, requests.node, '
                                                  'requests.request_index, requests.payload, '
                                                  'requests.response_schema, requests.created_at, '
                                                  'requests.answer, requests.answered_at \n'
                                                  'FROM requests \n'
                                                  'WHERE requests.answer IS NULL AND '
                                                  'requests.workflow_name = $1::VARCHAR ORDER BY '
                                                  'requests.created_at, requests.run_id, '
                                                  'requests.request_id',
                                                  ('workflow_name',),
                                                  {},
                                                  ('run_id',
                                                   'request_id',
                                                   'workflow_name',
                                                   'thread',
                                                   'checkpoint_id',
                                                   'node',
                                                   'request_index',
                                                   'payload',
                                                   'response_schema',
                                                   'created_at',
                                                   'answer',
                                                   'answered_at'))},
                          'req_insert': ('INSERT INTO requests (run_id, request_id, workflow_name, '
                                         'thread, checkpoint_id, node, request_index, payload, '
                                         'response_schema, created_at, answer, answered_at) VALUES '
                                         '($1::VARCHAR, $2::VARCHAR, $3::VARCHAR, $4::VARCHAR, '
                                         '$5::VARCHAR, $6::VARCHAR, $7::INTEGER, $8::BYTEA, '
                                         '$9::BYTEA, $10::BIGINT, $11::BYTEA, $12::BIGINT) ON '
                                         'CONFLICT (run_id, request_id) DO NOTHING RETURNING 1',
                                         ('run_id',
                                          'request_id',
                                          'workflow_name',
                                          'thread',
                                          'checkpoint_id',
                                          'node',
                                          'request_index',
                                          'payload',
                                          'response_schema',
                                          'created_at',
                                          'answer',
                                          'answered_at'),
                                         {},
                                         ()),
                          'req_list': {(False, False): ('SELECT requests.run_id, '
                                                        'requests.request_id, '
                                                        'requests.workflow_name, requests.thread, '
                                                        'requests.checkpoint_id, requests.node, '
                                                        'requests.request_index, requests.payload, '
                                                        'requests.response_schema, '
                                                        'requests.created_at, requests.answer, '
                                                        'requests.answered_at \n'
                                                        'FROM requests \n'
                                                        'WHERE requests.run_id = $1::VARCHAR ORDER '
                                                        'BY requests.created_at, '
                                                        'requests.request_id',
                                                        ('run_id',),
                                                        {},
                                                        ('run_id',
                                                         'request_id',
                                                         'workflow_name',
                                                         'thread',
                                                         'checkpoint_id',
                                                         'node',
                                                         'request_index',
                                                         'payload',
                                                         'response_schema',
                                                         'created_at',
                                                         'answer',
                                                         'answered_at')),
                                       (False, True): ('SELECT requests.run_id, '
                                                       'requests.request_id, '
                                                       'requests.workflow_name, requests.thread, '
                                                       'requests.checkpoint_id, requests.node, '
                                                       'requests.request_index, requests.payload, '
                                                       'requests.response_schema, '
                                                       'requests.created_at, requests.answer, '
                                                       'requests.answered_at \n'
                                                       'FROM requests \n'
                                                       'WHERE requests.run_id = $1::VARCHAR AND '
                                                       'requests.checkpoint_id = $2::VARCHAR ORDER '
                                                       'BY requests.created_at, '
                                                       'requests.request_id',
                                                       ('run_id', 'checkpoint_id'),
                                                       {},
                                                       ('run_id',
                                                        'request_id',
                                                        'workflow_name',
                                                        'thread',
                                                        'checkpoint_id',
                                                        'node',
                                                        'request_index',
                                                        'payload',
                                                        'response_schema',
                                                        'created_at',
                                                        'answer',
                                                        'answered_at')),
                                       (True, False): ('SELECT requests.run_id, '
                                                       'requests.request_id, '
                                                       'requests.workflow_name, requests.thread, '
                                                       'requests.checkpoint_id, requests.node, '
                                                       'requests.request_index, requests.payload, '
                                                       'requests.response_schema, '
                                                       'requests.created_at, requests.answer, '
                                                       'requests.answered_at \n'
                                                       'FROM requests \n'
                                                       'WHERE requests.run_id = $1::VARCHAR AND '
                                                       'requests.answer IS NULL ORDER BY '
                                                       'requests.created_at, requests.request_id',
                                                       ('run_id',),
                                                       {},
                                                       ('run_id',
                                                        'request_id',
                                                        'workflow_name',
                                                        'thread',
                                                        'checkpoint_id',
                                                        'node',
                                                        'request_index',
                                                        'payload',
                                                        'response_schema',
                                                        'created_at',
                                                        'answer',
                                                        'answered_at')),
                                       (True, True): ('SELECT requests.run_id, '
                                                      'requests.request_id, '
                                                      'requests.workflow_name, requests.thread, '
                                                      'requests.checkpoint_id, requests.node, '
                                                      'requests.request_index, requests.payload, '
                                                      'requests.response_schema, '
                                                      'requests.created_at, requests.answer, '
                                                      'requests.answered_at \n'
                                                      'FROM requests \n'
                                                      'WHERE requests.run_id = $1::VARCHAR AND '
                                                      'requests.answer IS NULL AND '
                                                      'requests.checkpoint_id = $2::VARCHAR ORDER '
                                                      'BY requests.created_at, requests.request_id',
                                                      ('run_id', 'checkpoint_id'),
                                                      {},
                                                      ('run_id',
                                                       'request_id',
                                                       'workflow_name',
                                                       'thread',
                                                       'checkpoint_id',
                                                       'node',
                                                       'request_index',
                                                       'payload',
                                                       'response_schema',
                                                       'created_at',
                                                       'answer',
                                                       'answered_at'))},
                          'req_reopen': ('UPDATE requests SET answer=$1::BYTEA, '
                                         'answered_at=$2::BIGINT WHERE requests.run_id = '
                                         '$3::VARCHAR AND requests.request_id = $4::VARCHAR '
                                         'RETURNING 1',
                                         ('answer', 'answered_at', 'run_id', 'request_id'),
                                         {'answer': None, 'answered_at': None},
                                         ()),
                          'run_cancel': ('UPDATE runs SET status=$1::VARCHAR, '
                                         'updated_at=$2::BIGINT, lease_owner=$3::VARCHAR, '
                                         'lease_epoch=(runs.lease_epoch + $4::INTEGER), '
                                         'lease_expires_at=$5::BIGINT WHERE runs.run_id = '
                                         '$6::VARCHAR RETURNING 1',
                                         ('status',
                                          'now',
                                          'lease_owner',
                                          'lease_epoch_1',
                                          'lease_expires_at',
                                          'run_id'),
                                         {'lease_epoch_1': 1,
                                          'lease_expires_at': None,
                                          'lease_owner': None,
                                          'status': 'cancelled'},
                                         ()),
                          'run_claim': ('UPDATE runs SET status=$1::VARCHAR, '
                                        'updated_at=$2::BIGINT, error=$3::VARCHAR, '
                                        'lease_owner=$4::VARCHAR, lease_epoch=$5::INTEGER, '
                                        'lease_expires_at=$6::BIGINT WHERE runs.run_id = '
                                        '$7::VARCHAR AND runs.lease_epoch = $8::INTEGER RETURNING '
                                        '1',
                                        ('new_status',
                                         'now',
                                         'new_error',
                                         'owner',
                                         'epoch',
                                         'expires',
                                         'run_id',
                                         'old_epoch'),
                                        {},
                                        ()),
                          'run_claimable': ('SELECT runs.run_id, runs.workflow_name, runs.status, '
                                            'runs.created_at, runs.updated_at, '
                                            'runs.head_checkpoint_id, runs.signature, '
                                            'runs.max_supersteps, runs.error, runs.forked_from, '
                                            'runs.workflow_ref, runs.lease_owner, '
                                            'runs.lease_epoch, runs.lease_expires_at, '
                                            'runs.input_digest, runs.workflow_version, '
                                            'runs.priority, runs.wake_at \n'
                                            'FROM runs \n'
                                            'WHERE runs.workflow_name = $1::VARCHAR AND '
                                            'runs.workflow_version = $2::VARCHAR AND (runs.status '
                                            '= $3::VARCHAR OR runs.status = $4::VARCHAR AND '
                                            '(runs.lease_expires_at IS NULL OR '
                                            'runs.lease_expires_at < $5::BIGINT)) ORDER BY '
                                            'runs.priority DESC, runs.created_at, runs.run_id \n'
                                            ' LIMIT $6 FOR UPDATE SKIP LOCKED',
                                            ('workflow_name',
                                             'workflow_version',
                                             'status_1',
                                             'status_2',
                                             'now',
                                             'n'),
                                            {'status_1': 'queued', 'status_2': 'running'},
                                            ('run_id',
                                             'workflow_name',
                                             'status',
                                             'created_at',
                                             'updated_at',
                                             'head_checkpoint_id',
                                             'signature',
                                             'max_supersteps',
                                             'error',
                                             'forked_from',
                                             'workflow_ref',
                                             'lease_owner',
                                             'lease_epoch',
                                             'lease_expires_at',
                                             'input_digest',
                                             'workflow_version',
                                             'priority',
                                             'wake_at')),
                          'run_get': ('SELECT runs.run_id, runs.workflow_name, runs.status, '
                                      'runs.created_at, runs.updated_at, runs.head_checkpoint_id, '
                                      'runs.signature, runs.max_supersteps, runs.error, '
                                      'runs.forked_from, runs.workflow_ref, runs.lease_owner, '
                                      'runs.lease_epoch, runs.lease_expires_at, runs.input_digest, '
                                      'runs.workflow_version, runs.priority, runs.wake_at \n'
                                      'FROM runs \n'
                                      'WHERE runs.run_id = $1::VARCHAR',
                                      ('run_id',),
                                      {},
                                      ('run_id',
                                       'workflow_name',
                                       'status',
                                       'created_at',
                                       'updated_at',
                                       'head_checkpoint_id',
                                       'signature',
                                       'max_supersteps',
                                       'error',
                                       'forked_from',
                                       'workflow_ref',
                                       'lease_owner',
                                       'lease_epoch',
                                       'lease_expires_at',
                                       'input_digest',
                                       'workflow_version',
                                       'priority',
                                       'wake_at')),
                          'run_get_locked': ('SELECT runs.run_id, runs.workflow_name, runs.status, '
                                             'runs.created_at, runs.updated_at, '
                                             'runs.head_checkpoint_id, runs.signature, '
                                             'runs.max_supersteps, runs.error, runs.forked_from, '
                                             'runs.workflow_ref, runs.lease_owner, '
                                             'runs.lease_epoch, runs.lease_expires_at, '
                                             'runs.input_digest, runs.workflow_version, '
                                             'runs.priority, runs.wake_at \n'
                                             'FROM runs \n'
                                             'WHERE runs.run_id = $1::VARCHAR FOR UPDATE',
                                             ('run_id',),
                                             {},
                                             ('run_id',
                                              'workflow_name',
                                              'status',
                                              'created_at',
                                              'updated_at',
                                              'head_checkpoint_id',
                                              'signature',
                                              'max_supersteps',
                                              'error',
                                              'forked_from',
                                              'workflow_ref',
                                              'lease_owner',
                                              'lease_epoch',
                                              'lease_expires_at',
                                              'input_digest',
                                              'workflow_version',
                                              'priority',
                                              'wake_at')),
                          'run_insert': ('INSERT INTO runs (run_id, workflow_name, status, '
                                         'created_at, updated_at, head_checkpoint_id, signature, '
                                         'max_supersteps, error, forked_from, workflow_ref, '
                                         'lease_owner, lease_epoch, lease_expires_at, '
                                         'input_digest, workflow_version, priority, wake_at) '
                                         'VALUES ($1::VARCHAR, $2::VARCHAR, $3::VARCHAR, '
                                         '$4::BIGINT, $5::BIGINT, $6::VARCHAR, $7::VARCHAR, '
                                         '$8::INTEGER, $9::VARCHAR, $10::VARCHAR, $11::VARCHAR, '
                                         '$12::VARCHAR, $13::INTEGER, $14::BIGINT, $15::VARCHAR, '
                                         '$16::VARCHAR, $17::INTEGER, $18::BIGINT) RETURNING 1',
                                         ('run_id',
                                          'workflow_name',
                                          'status',
                                          'created_at',
                                          'updated_at',
                                          'head_checkpoint_id',
                                          'signature',
                                          'max_supersteps',
                                          'error',
                                          'forked_from',
                                          'workflow_ref',
                                          'lease_owner',
                                          'lease_epoch',
                                          'lease_expires_at',
                                          'input_digest',
                                          'workflow_version',
                                          'priority',
                                          'wake_at'),
                                         {},
                                         ()),
                          'run_lease': ('SELECT runs.lease_owner, runs.lease_epoch, '
                                        'runs.lease_expires_at \n'
                                        'FROM runs \n'
                                        'WHERE runs.run_id = $1::VARCHAR FOR UPDATE',
                                        ('run_id',),
                                        {},
                                        ('lease_owner', 'lease_epoch', 'lease_expires_at')),
                          'run_list': {(False, False): ('SELECT runs.run_id, runs.workflow_name, '
                                                        'runs.status, runs.created_at, '
                                                        'runs.updated_at, runs.head_checkpoint_id, '
                                                        'runs.signature, runs.max_supersteps, '
                                                        'runs.error, runs.forked_from, '
                                                        'runs.workflow_ref, runs.lease_owner, '
                                                        'runs.lease_epoch, runs.lease_expires_at, '
                                                        'runs.input_digest, runs.workflow_version, '
                                                        'runs.priority, runs.wake_at \n'
                                                        'FROM runs ORDER BY runs.created_at DESC, '
                                                        'runs.run_id DESC',
                                                        (),
                                                        {},
                                                        ('run_id',
                                                         'workflow_name',
                                                         'status',
                                                         'created_at',
                                                         'updated_at',
                                                         'head_checkpoint_id',
                                                         'signature',
                                                         'max_supersteps',
                                                         'error',
                                                         'forked_from',
                                                         'workflow_ref',
                                                         'lease_owner',
                                                         'lease_epoch',
                                                         'lease_expires_at',
                                                         'input_digest',
                                                         'workflow_version',
                                                         'priority',
                                                         'wake_at')),
                                       (False, True): ('SELECT runs.run_id, runs.workflow_name, '
                                                       'runs.status, runs.created_at, '
                                                       'runs.updated_at, runs.head_checkpoint_id, '
                                                       'runs.signature, runs.max_supersteps, '
                                                       'runs.error, runs.forked_from, '
                                                       'runs.workflow_ref, runs.lease_owner, '
                                                       'runs.lease_epoch, runs.lease_expires_at, '
                                                       'runs.input_digest, runs.workflow_version, '
                                                       'runs.priority, runs.wake_at \n'
                                                       'FROM runs \n'
                                                       'WHERE runs.workflow_name = $1::VARCHAR '
                                                       'ORDER BY runs.created_at DESC, runs.run_id '
                                                       'DESC',
                                                       ('workflow_name',),
                                                       {},
                                                       ('run_id',
                                                        'workflow_name',
                                                        'status',
                                                        'created_at',
                                                        'updated_at',
                                                        'head_checkpoint_id',
                                                        'signature',
                                                        'max_supersteps',
                                                        'error',
                                                        'forked_from',
                                                        'workflow_ref',
                                                        'lease_owner',
                                                        'lease_epoch',
                                                        'lease_expires_at',
                                                        'input_digest',
                                                        'workflow_version',
                                                        'priority',
                                                        'wake_at')),
                                       (True, False): ('SELECT runs.run_id, runs.workflow_name, '
                                                       'runs.status, runs.created_at, '
                                                       'runs.updated_at, runs.head_checkpoint_id, '
                                                       'runs.signature, runs.max_supersteps, '
                                                       'runs.error, runs.forked_from, '
                                                       'runs.workflow_ref, runs.lease_owner, '
                                                       'runs.lease_epoch, runs.lease_expires_at, '
                                                       'runs.input_digest, runs.workflow_version, '
                                                       'runs.priority, runs.wake_at \n'
                                                       'FROM runs \n'
                                                       'WHERE runs.status = $1::VARCHAR ORDER BY '
                                                       'runs.created_at DESC, runs.run_id DESC',
                                                       ('status',),
                                                       {},
                                                       ('run_id',
                                                        'workflow_name',
                                                        'status',
                                                        'created_at',
                                                        'updated_at',
                                                        'head_checkpoint_id',
                                                        'signature',
                                                        'max_supersteps',
                                                        'error',
                                                        'forked_from',
                                                        'workflow_ref',
                                                        'lease_owner',
                                                        'lease_epoch',
                                                        'lease_expires_at',
                                                        'input_digest',
                                                        'workflow_version',
                                                        'priority',
                                                        'wake_at')),
                                       (True, True): ('SELECT runs.run_id, runs.workflow_name, '
                                                      'runs.status, runs.created_at, '
                                                      'runs.updated_at, runs.head_checkpoint_id, '
                                                      'runs.signature, runs.max_supersteps, '
                                                      'runs.error, runs.forked_from, '
                                                      'runs.workflow_ref, runs.lease_owner, '
                                                      'runs.lease_epoch, runs.lease_expires_at, '
                                                      'runs.input_digest, runs.workflow_version, '
                                                      'runs.priority, runs.wake_at \n'
                                                      'FROM runs \n'
                                                      'WHERE runs.status = $1::VARCHAR AND '
                                                      'runs.workflow_name = $2::VARCHAR ORDER BY '
                                                      'runs.created_at DESC, runs.run_id DESC',
                                                      ('status', 'workflow_name'),
                                                      {},
                                                      ('run_id',
                                                       'workflow_name',
                                                       'status',
                                                       'created_at',
                                                       'updated_at',
                                                       'head_checkpoint_id',
                                                       'signature',
                                                       'max_supersteps',
                                                       'error',
                                                       'forked_from',
                                                       'workflow_ref',
                                                       'lease_owner',
                                                       'lease_epoch',
                                                       'lease_expires_at',
                                                       'input_digest',
                                                       'workflow_version',
                                                       'priority',
                                                       'wake_at'))},
                          'run_set_status': ('UPDATE runs SET status=$1::VARCHAR, '
                                             'updated_at=$2::BIGINT WHERE runs.run_id = '
                                             '$3::VARCHAR RETURNING 1',
                                             ('new_status', 'now', 'run_id'),
                                             {},
                                             ()),
                          'run_touch': ('UPDATE runs SET updated_at=$1::BIGINT WHERE runs.run_id = '
                                        '$2::VARCHAR AND runs.lease_epoch = $3::INTEGER AND '
                                        'runs.lease_owner = $4::VARCHAR RETURNING 1',
                                        ('now', 'run_id', 'epoch', 'owner'),
                                        {},
                                        ()),
                          'run_touch_cas': ('UPDATE runs SET updated_at=$1::BIGINT WHERE '
                                            'runs.run_id = $2::VARCHAR AND runs.lease_epoch = '
                                            '$3::INTEGER AND runs.lease_owner = $4::VARCHAR AND '
                                            'runs.head_checkpoint_id = $5::VARCHAR RETURNING 1',
                                            ('now', 'run_id', 'epoch', 'owner', 'expect_head'),
                                            {},
                                            ()),
                          'run_update': ('UPDATE runs SET status=$1::VARCHAR, '
                                         'updated_at=$2::BIGINT, head_checkpoint_id=coalesce($3, '
                                         'runs.head_checkpoint_id), error=$4::VARCHAR WHERE '
                                         'runs.run_id = $5::VARCHAR AND runs.lease_epoch = '
                                         '$6::INTEGER AND runs.lease_owner = $7::VARCHAR RETURNING '
                                         '1',
                                         ('new_status',
                                          'now',
                                          'new_head',
                                          'new_error',
                                          'run_id',
                                          'epoch',
                                          'owner'),
                                         {},
                                         ()),
                          'run_update_cas': ('UPDATE runs SET status=$1::VARCHAR, '
                                             'updated_at=$2::BIGINT, '
                                             'head_checkpoint_id=coalesce($3, '
                                             'runs.head_checkpoint_id), error=$4::VARCHAR WHERE '
                                             'runs.run_id = $5::VARCHAR AND runs.lease_epoch = '
                                             '$6::INTEGER AND runs.lease_owner = $7::VARCHAR AND '
                                             'runs.head_checkpoint_id = $8::VARCHAR RETURNING 1',
                                             ('new_status',
                                              'now',
                                              'new_head',
                                              'new_error',
                                              'run_id',
                                              'epoch',
                                              'owner',
                                              'expect_head'),
                                             {},
                                             ()),
                          'run_update_release': ('UPDATE runs SET status=$1::VARCHAR, '
                                                 'updated_at=$2::BIGINT, '
                                                 'head_checkpoint_id=coalesce($3, '
                                                 'runs.head_checkpoint_id), error=$4::VARCHAR, '
                                                 'lease_owner=$5::VARCHAR, '
                                                 'lease_expires_at=$6::BIGINT WHERE runs.run_id = '
                                                 '$7::VARCHAR AND runs.lease_epoch = $8::INTEGER '
                                                 'AND runs.lease_owner = $9::VARCHAR RETURNING 1',
                                                 ('new_status',
                                                  'now',
                                                  'new_head',
                                                  'new_error',
                                                  'lease_owner',
                                                  'lease_expires_at',
                                                  'run_id',
                                                  'epoch',
                                                  'owner'),
                                                 {'lease_expires_at': None, 'lease_owner': None},
                                                 ()),
                          'run_update_release_cas': ('UPDATE runs SET status=$1::VARCHAR, '
                                                     'updated_at=$2::BIGINT, '
                                                     'head_checkpoint_id=coalesce($3, '
                                                     'runs.head_checkpoint_id), error=$4::VARCHAR, '
                                                     'lease_owner=$5::VARCHAR, '
                                                     'lease_expires_at=$6::BIGINT WHERE '
                                                     'runs.run_id = $7::VARCHAR AND '
                                                     'runs.lease_epoch = $8::INTEGER AND '
                                                     'runs.lease_owner = $9::VARCHAR AND '
                                                     'runs.head_checkpoint_id = $10::VARCHAR '
                                                     'RETURNING 1',
                                                     ('new_status',
                                                      'now',
                                                      'new_head',
                                                      'new_error',
                                                      'lease_owner',
                                                      'lease_expires_at',
                                                      'run_id',
                                                      'epoch',
                                                      'owner',
                                                      'expect_head'),
                                                     {'lease_expires_at': None,
                                                      'lease_owner': None},
                                                     ()),
                          'step_delete': ('DELETE FROM steps WHERE steps.run_id = $1::VARCHAR AND '
                                          'steps.checkpoint_id = $2::VARCHAR RETURNING 1',
                                          ('run_id', 'checkpoint_id'),
                                          {},
                                          ()),
                          'step_get': ('SELECT steps.name, steps.data \n'
                                       'FROM steps \n'
                                       'WHERE steps.run_id = $1::VARCHAR AND steps.checkpoint_id = '
                                       '$2::VARCHAR AND steps.node = $3::VARCHAR',
                                       ('run_id', 'checkpoint_id', 'node'),
                                       {},
                                       ('name', 'data')),
                          'step_upsert': ('INSERT INTO steps (run_id, checkpoint_id, node, name, '
                                          'data, created_at) VALUES ($1::VARCHAR, $2::VARCHAR, '
                                          '$3::VARCHAR, $4::VARCHAR, $5::BYTEA, $6::BIGINT) ON '
                                          'CONFLICT (run_id, checkpoint_id, node, name) DO UPDATE '
                                          'SET data = excluded.data, created_at = '
                                          'excluded.created_at RETURNING 1',
                                          ('run_id',
                                           'checkpoint_id',
                                           'node',
                                           'name',
                                           'data',
                                           'created_at'),
                                          {},
                                          ()),
                          'tw_delete': ('DELETE FROM task_writes WHERE task_writes.run_id = '
                                        '$1::VARCHAR AND task_writes.checkpoint_id = $2::VARCHAR '
                                        'RETURNING 1',
                                        ('run_id', 'checkpoint_id'),
                                        {},
                                        ()),
                          'tw_get': ('SELECT task_writes.run_id, task_writes.checkpoint_id, '
                                     'task_writes.node, task_writes.data, task_writes.created_at \n'
                                     'FROM task_writes \n'
                                     'WHERE task_writes.run_id = $1::VARCHAR AND '
                                     'task_writes.checkpoint_id = $2::VARCHAR ORDER BY '
                                     'task_writes.node',
                                     ('run_id', 'checkpoint_id'),
                                     {},
                                     ('run_id', 'checkpoint_id', 'node', 'data', 'created_at')),
                          'tw_upsert': ('INSERT INTO task_writes (run_id, checkpoint_id, node, '
                                        'data, created_at) VALUES ($1::VARCHAR, $2::VARCHAR, '
                                        '$3::VARCHAR, $4::BYTEA, $5::BIGINT) ON CONFLICT (run_id, '
                                        'checkpoint_id, node) DO UPDATE SET data = excluded.data, '
                                        'created_at = excluded.created_at RETURNING 1',
                                        ('run_id', 'checkpoint_id', 'node', 'data', 'created_at'),
                                        {},
                                        ()),
                          'value_delete': ('DELETE FROM channel_values WHERE channel_values.run_id '
                                           '= $1::VARCHAR AND channel_values.thread = $2::VARCHAR '
                                           'AND channel_values.channel = $3::VARCHAR AND '
                                           'channel_values.seq = $4::INTEGER RETURNING 1',
                                           ('run_id', 'thread', 'channel', 'seq'),
                                           {},
                                           ()),
                          'value_get': ('SELECT channel_values.data \n'
                                        'FROM channel_values \n'
                                        'WHERE channel_values.run_id = $1::VARCHAR AND '
                                        'channel_values.thread = $2::VARCHAR AND '
                                        'channel_values.channel = $3::VARCHAR AND '
                                        'channel_values.seq = $4::INTEGER',
                                        ('run_id', 'thread', 'channel', 'seq'),
                                        {},
                                        ('data',)),
                          'value_insert': ('INSERT INTO channel_values (run_id, thread, channel, '
                                           'seq, data) VALUES ($1::VARCHAR, $2::VARCHAR, '
                                           '$3::VARCHAR, $4::INTEGER, $5::BYTEA) RETURNING 1',
                                           ('run_id', 'thread', 'channel', 'seq', 'data'),
                                           {},
                                           ()),
                          'value_keys': ('SELECT channel_values.channel, channel_values.seq \n'
                                         'FROM channel_values \n'
                                         'WHERE channel_values.run_id = $1::VARCHAR AND '
                                         'channel_values.thread = $2::VARCHAR',
                                         ('run_id', 'thread'),
                                         {},
                                         ('channel', 'seq'))},
 'sqlite': {'chunk_delete_thread': ('DELETE FROM log_chunks WHERE log_chunks.run_id = ? AND '
                                    'log_chunks.thread = ?',
                                    ('run_id', 'thread'),
                                    {},
                                    ()),
            'chunk_insert': ('INSERT INTO log_chunks (run_id, thread, seq, channel, data) VALUES '
                             '(?, ?, ?, ?, ?)',
                             ('run_id', 'thread', 'seq', 'channel', 'data'),
                             {},
                             ()),
            'chunk_upto': ('SELECT log_chunks.channel, log_chunks.data \n'
                           'FROM log_chunks \n'
                           'WHERE log_chunks.run_id = ? AND log_chunks.thread = ? AND '
                           'log_chunks.seq <= ? ORDER BY log_chunks.seq, log_chunks.channel',
                           ('run_id', 'thread', 'upto'),
                           {},
                           ('channel', 'data')),
            'cp_delete': ('DELETE FROM checkpoints WHERE checkpoints.run_id = ? AND '
                          'checkpoints.checkpoint_id = ?',
                          ('run_id', 'checkpoint_id'),
                          {},
                          ()),
            'cp_get': ('SELECT checkpoints.run_id, checkpoints.checkpoint_id, checkpoints.thread, '
                       'checkpoints.namespace, checkpoints.parent_id, checkpoints.seq, '
                       'checkpoints.superstep, checkpoints.created_at, checkpoints.status, '
                       'checkpoints.source, checkpoints.nodes, checkpoints.routing_reason, '
                       'checkpoints.next_tasks, checkpoints.joins, checkpoints.value_versions, '
                       'checkpoints.log_lengths, checkpoints.error, checkpoints.size \n'
                       'FROM checkpoints \n'
                       'WHERE checkpoints.run_id = ? AND checkpoints.checkpoint_id = ?',
                       ('run_id', 'checkpoint_id'),
                       {},
                       ('run_id',
                        'checkpoint_id',
                        'thread',
                        'namespace',
                        'parent_id',
                        'seq',
                        'superstep',
                        'created_at',
                        'status',
                        'source',
                        'nodes',
                        'routing_reason',
                        'next_tasks',
                        'joins',
                        'value_versions',
                        'log_lengths',
                        'error',
                        'size')),
            'cp_head': ('SELECT checkpoints.run_id, checkpoints.checkpoint_id, checkpoints.thread, '
                        'checkpoints.namespace, checkpoints.parent_id, checkpoints.seq, '
                        'checkpoints.superstep, checkpoints.created_at, checkpoints.status, '
                        'checkpoints.source, checkpoints.nodes, checkpoints.routing_reason, '
                        'checkpoints.next_tasks, checkpoints.joins, checkpoints.value_versions, '
                        'checkpoints.log_lengths, checkpoints.error, checkpoints.size \n'
                        'FROM checkpoints \n'
                        'WHERE checkpoints.run_id = ? AND checkpoints.thread = ? ORDER BY '
                        'checkpoints.seq DESC\n'
                        ' LIMIT ? OFFSET ?',
                        ('run_id', 'thread', 'param_1', 'param_2'),
                        {'param_1': 1, 'param_2': 0},
                        ('run_id',
                         'checkpoint_id',
                         'thread',
                         'namespace',
                         'parent_id',
                         'seq',
                         'superstep',
                         'created_at',
                         'status',
                         'source',
                         'nodes',
                         'routing_reason',
                         'next_tasks',
                         'joins',
                         'value_versions',
                         'log_lengths',
                         'error',
                         'size')),
            'cp_insert': ('INSERT INTO checkpoints (run_id, checkpoint_id, thread, namespace, '
                          'parent_id, seq, superstep, created_at, status, source, nodes, '
                          'routing_reason, next_tasks, joins, value_versions, log_lengths, error, '
                          'size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                          ('run_id',
                           'checkpoint_id',
                           'thread',
                           'namespace',
                           'parent_id',
                           'seq',
                           'superstep',
                           'created_at',
                           'status',
                           'source',
                           'nodes',
                           'routing_reason',
                           'next_tasks',
                           'joins',
                           'value_versions',
                           'log_lengths',
                           'error',
                           'size'),
                          {},
                          ()),
            'cp_list': {(False, False): ('SELECT checkpoints.run_id, checkpoints.checkpoint_id, '
                                         'checkpoints.thread, checkpoints.namespace, '
                                         'checkpoints.parent_id, checkpoints.seq, '
                                         'checkpoints.superstep, checkpoints.created_at, '
                                         'checkpoints.status, checkpoints.source, '
                                         'checkpoints.nodes, checkpoints.routing_reason, '
                                         'checkpoints.next_tasks, checkpoints.joins, '
                                         'checkpoints.value_versions, checkpoints.log_lengths, '
                                         'checkpoints.error, checkpoints.size \n'
                                         'FROM checkpoints \n'
                                         'WHERE checkpoints.run_id = ? ORDER BY '
                                         'checkpoints.checkpoint_id DESC',
                                         ('run_id',),
                                         {},
                                         ('run_id',
                                          'checkpoint_id',
                                          'thread',
                                          'namespace',
                                          'parent_id',
                                          'seq',
                                          'superstep',
                                          'created_at',
                                          'status',
                                          'source',
                                          'nodes',
                                          'routing_reason',
                                          'next_tasks',
                                          'joins',
                                          'value_versions',
                                          'log_lengths',
                                          'error',
                                          'size')),
                        (False, True): ('SELECT checkpoints.run_id, checkpoints.checkpoint_id, '
                                        'checkpoints.thread, checkpoints.namespace, '
                                        'checkpoints.parent_id, checkpoints.seq, '
                                        'checkpoints.superstep, checkpoints.created_at, '
                                        'checkpoints.status, checkpoints.source, '
                                        'checkpoints.nodes, checkpoints.routing_reason, '
                                        'checkpoints.next_tasks, checkpoints.joins, '
                                        'checkpoints.value_versions, checkpoints.log_lengths, '
                                        'checkpoints.error, checkpoints.size \n'
                                        'FROM checkpoints \n'
                                        'WHERE checkpoints.run_id = ? AND checkpoints.thread = ? '
                                        'ORDER BY checkpoints.checkpoint_id DESC',
                                        ('run_id', 'thread'),
                                        {},
                                        ('run_id',
                                         'checkpoint_id',
                                         'thread',
                                         'namespace',
                                         'parent_id',
                                         'seq',
                                         'superstep',
                                         'created_at',
                                         'status',
                                         'source',
                                         'nodes',
                                         'routing_reason',
                                         'next_tasks',
                                         'joins',
                                         'value_versions',
                                         'log_lengths',
                                         'error',
                                         'size')),
                        (True, False): ('SELECT checkpoints.run_id, checkpoints.checkpoint_id, '
                                        'checkpoints.thread, checkpoints.namespace, '
                                        'checkpoints.parent_id, checkpoints.seq, '
                                        'checkpoints.superstep, checkpoints.created_at, '
                                        'checkpoints.status, checkpoints.source, '
                                        'checkpoints.nodes, checkpoints.routing_reason, '
                                        'checkpoints.next_tasks, checkpoints.joins, '
                                        'checkpoints.value_versions, checkpoints.log_lengths, '
                                        'checkpoints.error, checkpoints.size \n'
                                        'FROM checkpoints \n'
                                        'WHERE checkpoints.run_id = ? AND checkpoints.namespace = '
                                        '? ORDER BY checkpoints.checkpoint_id DESC',
                                        ('run_id', 'namespace'),
                                        {},
                                        ('run_id',
                                         'checkpoint_id',
                                         'thread',
                                         'namespace',
                                         'parent_id',
                                         'seq',
                                         'superstep',
                                         'created_at',
                                         'status',
                                         'source',
                                         'nodes',
                                         'routing_reason',
                                         'next_tasks',
                                         'joins',
                                         'value_versions',
                                         'log_lengths',
                                         'error',
                                         'size')),
                        (True, True): ('SELECT checkpoints.run_id, checkpoints.checkpoint_id, '
                                       'checkpoints.thread, checkpoints.namespace, '
                                       'checkpoints.parent_id, checkpoints.seq, '
                                       'checkpoints.superstep, checkpoints.created_at, '
                                       'checkpoints.status, checkpoints.source, checkpoints.nodes, '
                                       'checkpoints.routing_reason, checkpoints.next_tasks, '
                                       'checkpoints.joins, checkpoints.value_versions, '
                                       'checkpoints.log_lengths, checkpoints.error, '
                                       'checkpoints.size \n'
                                       'FROM checkpoints \n'
                                       'WHERE checkpoints.run_id = ? AND checkpoints.namespace = ? '
                                       'AND checkpoints.thread = ? ORDER BY '
                                       'checkpoints.checkpoint_id DESC',
                                       ('run_id', 'namespace', 'thread'),
                                       {},
                                       ('run_id',
                                        'checkpoint_id',
                                        'thread',
                                        'namespace',
                                        'parent_id',
                                        'seq',
                                        'superstep',
                                        'created_at',
                                        'status',
                                        'source',
                                        'nodes',
                                        'routing_reason',
                                        'next_tasks',
                                        'joins',
                                        'value_versions',
                                        'log_lengths',
                                        'error',
                                        'size'))},
            'cp_mark': ('UPDATE checkpoints SET status=?, error=? WHERE checkpoints.run_id = ? AND '
                        'checkpoints.checkpoint_id = ?',
                        ('new_status', 'new_error', 'run_id', 'checkpoint_id'),
                        {},
                        ()),
            'cp_scan': {(False,): ('SELECT checkpoints.run_id, checkpoints.thread, '
                                   'checkpoints.checkpoint_id, checkpoints.created_at, '
                                   'checkpoints.status \n'
                                   'FROM checkpoints JOIN runs ON runs.run_id = checkpoints.run_id '
                                   'ORDER BY checkpoints.run_id, checkpoints.thread, '
                                   'checkpoints.seq',
                                   (),
                                   {},
                                   ('run_id', 'thread', 'checkpoint_id', 'created_at', 'status')),
                        (True,): ('SELECT checkpoints.run_id, checkpoints.thread, '
                                  'checkpoints.checkpoint_id, checkpoints.created_at, '
                                  'checkpoints.status \n'
                                  'FROM checkpoints JOIN runs ON runs.run_id = '
                                  'checkpoints.run_id \n'
                                  'WHERE checkpoints.run_id = ? ORDER BY checkpoints.run_id, '
                                  'checkpoints.thread, checkpoints.seq',
                                  ('run_id',),
                                  {},
                                  ('run_id', 'thread', 'checkpoint_id', 'created_at', 'status'))},
            'cp_versions': ('SELECT checkpoints.value_versions \n'
                            'FROM checkpoints \n'
                            'WHERE checkpoints.run_id = ? AND checkpoints.thread = ?',
                            ('run_id', 'thread'),
                            {},
                            ('value_versions',)),
            'lease_check': ('SELECT runs.run_id \n'
                            'FROM runs \n'
                            'WHERE runs.run_id = ? AND runs.lease_epoch = ? AND runs.lease_owner = '
                            '?',
                            ('run_id', 'epoch', 'owner'),
                            {},
                            ('run_id',)),
            'lease_release': ('UPDATE runs SET lease_owner=?, lease_expires_at=? WHERE runs.run_id '
                              '= ? AND runs.lease_epoch = ? AND runs.lease_owner = ?',
                              ('lease_owner', 'lease_expires_at', 'run_id', 'epoch', 'owner'),
                              {'lease_expires_at': None, 'lease_owner': None},
                              ()),
            'lease_release_requeue': ('UPDATE runs SET status=CASE WHEN (runs.status = ?) THEN ? '
                                      'ELSE runs.status END, updated_at=?, lease_owner=?, '
                                      'lease_expires_at=? WHERE runs.run_id = ? AND '
                                      'runs.lease_epoch = ? AND runs.lease_owner = ?',
                                      ('status_1',
                                       'param_1',
                                       'now',
                                       'lease_owner',
                                       'lease_expires_at',
                                       'run_id',
                                       'epoch',
                                       'owner'),
                                      {'lease_expires_at': None,
                                       'lease_owner': None,
                                       'param_1': 'queued',
                                       'status_1': 'running'},
                                      ()),
            'lease_renew': ('UPDATE runs SET lease_expires_at=? WHERE runs.run_id = ? AND '
                            'runs.lease_epoch = ? AND runs.lease_owner = ?',
                            ('expires', 'run_id', 'epoch', 'owner'),
                            {},
                            ()),
            'req_anchors': {(False,): ('SELECT DISTINCT requests.run_id, requests.checkpoint_id \n'
                                       'FROM requests \n'
                                       'WHERE requests.answer IS NULL',
                                       (),
                                       {},
                                       ('run_id', 'checkpoint_id')),
                            (True,): ('SELECT DISTINCT requests.run_id, requests.checkpoint_id \n'
                                      'FROM requests \n'
                                      'WHERE requests.answer IS NULL AND requests.run_id = ?',
                                      ('run_id',),
                                      {},
                                      ('run_id', 'checkpoint_id'))},
            'req_answer': ('UPDATE requests SET answer=?, answered_at=? WHERE requests.run_id = ? '
                           'AND requests.request_id = ?',
                           ('new_answer', 'now', 'run_id', 'request_id'),
                           {},
                           ()),
            'req_delete': ('DELETE FROM requests WHERE requests.run_id = ? AND '
                           'requests.checkpoint_id = ?',
                           ('run_id', 'checkpoint_id'),
                           {},
                           ()),
            'req_drop_open': ('DELETE FROM requests WHERE requests.run_id = ? AND requests.answer '
                              'IS NULL',
                              ('run_id',),
                              {},
                              ()),
            'req_get_answer': ('SELECT requests.answer \n'
                               'FROM requests \n'
                               'WHERE requests.run_id = ? AND requests.request_id = ?',
                               ('run_id', 'request_id'),
                               {},
                               ('answer',)),
            'req_inbox': {(False,): ('SELECT requests.run_id, requests.request_id, '
                                     'requests.workflow_name, requests.thread, '
                                     'requests.checkpoint_id, requests.node, '
                                     'requests.request_index, requests.payload, '
                                     'requests.response_schema, requests.created_at, '
                                     'requests.answer, requests.answered_at \n'
                                     'FROM requests \n'
                                     'WHERE requests.answer IS NULL ORDER BY requests.created_at, '
                                     'requests.run_id, requests.request_id',
                                     (),
                                     {},
                                     ('run_id',
                                      'request_id',
                                      'workflow_name',
                                      'thread',
                                      'checkpoint_id',
                                      'node',
                                      'request_index',
                                      'payload',
                                      'response_schema',
                                      'created_at',
                                      'answer',
                                      'answered_at')),
                          (True,): ('SELECT requests.run_id, requests.request_id, '
                                    'requests.workflow_name, requests.thread, '
                                    'requests.checkpoint_id, requests.node, '
                                    'requests.request_index, requests.payload, '
                                    'requests.response_schema, requests.created_at, '
                                    'requests.answer, requests.answered_at \n'
                                    'FROM requests \n'
                                    'WHERE requests.answer IS NULL AND requests.workflow_name = ? '
                                    'ORDER BY requests.created_at, requests.run_id, '
                                    'requests.request_id',
                                    ('workflow_name',),
                                    {},
                                    ('run_id',
                                     'request_id',
                                     'workflow_name',
                                     'thread',
                                     'checkpoint_id',
                                     'node',
                                     'request_index',
                                     'payload',
                                     'response_schema',
                                     'created_at',
                                     'answer',
                                     'answered_at'))},
            'req_insert': ('INSERT INTO requests (run_id, request_id, workflow_name, thread, '
                           'checkpoint_id, node, request_index, payload, response_schema, '
                           'created_at, answer, answered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '
                           '?, ?) ON CONFLICT (run_id, request_id) DO NOTHING',
                           ('run_id',
                            'request_id',
                            'workflow_name',
                            'thread',
                            'checkpoint_id',
                            'node',
                            'request_index',
                            'payload',
                            'response_schema',
                            'created_at',
                            'answer',
                            'answered_at'),
                           {},
                           ()),
            'req_list': {(False, False): ('SELECT requests.run_id, requests.request_id, '
                                          'requests.workflow_name, requests.thread, '
                                          'requests.checkpoint_id, requests.node, '
                                          'requests.request_index, requests.payload, '
                                          'requests.response_schema, requests.created_at, '
                                          'requests.answer, requests.answered_at \n'
                                          'FROM requests \n'
                                          'WHERE requests.run_id = ? ORDER BY requests.created_at, '
                                          'requests.request_id',
                                          ('run_id',),
                                          {},
                                          ('run_id',
                                           'request_id',
                                           'workflow_name',
                                           'thread',
                                           'checkpoint_id',
                                           'node',
                                           'request_index',
                                           'payload',
                                           'response_schema',
                                           'created_at',
                                           'answer',
                                           'answered_at')),
                         (False, True): ('SELECT requests.run_id, requests.request_id, '
                                         'requests.workflow_name, requests.thread, '
                                         'requests.checkpoint_id, requests.node, '
                                         'requests.request_index, requests.payload, '
                                         'requests.response_schema, requests.created_at, '
                                         'requests.answer, requests.answered_at \n'
                                         'FROM requests \n'
                                         'WHERE requests.run_id = ? AND requests.checkpoint_id = ? '
                                         'ORDER BY requests.created_at, requests.request_id',
                                         ('run_id', 'checkpoint_id'),
                                         {},
                                         ('run_id',
                                          'request_id',
                                          'workflow_name',
                                          'thread',
                                          'checkpoint_id',
                                          'node',
                                          'request_index',
                                          'payload',
                                          'response_schema',
                                          'created_at',
                                          'answer',
                                          'answered_at')),
                         (True, False): ('SELECT requests.run_id, requests.request_id, '
                                         'requests.workflow_name, requests.thread, '
                                         'requests.checkpoint_id, requests.node, '
                                         'requests.request_index, requests.payload, '
                                         'requests.response_schema, requests.created_at, '
                                         'requests.answer, requests.answered_at \n'
                                         'FROM requests \n'
                                         'WHERE requests.run_id = ? AND requests.answer IS NULL '
                                         'ORDER BY requests.created_at, requests.request_id',
                                         ('run_id',),
                                         {},
                                         ('run_id',
                                          'request_id',
                                          'workflow_name',
                                          'thread',
                                          'checkpoint_id',
                                          'node',
                                          'request_index',
                                          'payload',
                                          'response_schema',
                                          'created_at',
                                          'answer',
                                          'answered_at')),
                         (True, True): ('SELECT requests.run_id, requests.request_id, '
                                        'requests.workflow_name, requests.thread, '
                                        'requests.checkpoint_id, requests.node, '
                                        'requests.request_index, requests.payload, '
                                        'requests.response_schema, requests.created_at, '
                                        'requests.answer, requests.answered_at \n'
                                        'FROM requests \n'
                                        'WHERE requests.run_id = ? AND requests.answer IS NULL AND '
                                        'requests.checkpoint_id = ? ORDER BY requests.created_at, '
                                        'requests.request_id',
                                        ('run_id', 'checkpoint_id'),
                                        {},
                                        ('run_id',
                                         'request_id',
                                         'workflow_name',
                                         'thread',
                                         'checkpoint_id',
                                         'node',
                                         'request_index',
                                         'payload',
                                         'response_schema',
                                         'created_at',
                                         'answer',
                                         'answered_at'))},
            'req_reopen': ('UPDATE requests SET answer=?, answered_at=? WHERE requests.run_id = ? '
                           'AND requests.request_id = ?',
                           ('answer', 'answered_at', 'run_id', 'request_id'),
                           {'answer': None, 'answered_at': None},
                           ()),
            'run_cancel': ('UPDATE runs SET status=?, updated_at=?, lease_owner=?, '
                           'lease_epoch=(runs.lease_epoch + ?), lease_expires_at=? WHERE '
                           'runs.run_id = ?',
                           ('status',
                            'now',
                            'lease_owner',
                            'lease_epoch_1',
                            'lease_expires_at',
                            'run_id'),
                           {'lease_epoch_1': 1,
                            'lease_expires_at': None,
                            'lease_owner': None,
                            'status': 'cancelled'},
                           ()),
            'run_claim': ('UPDATE runs SET status=?, updated_at=?, error=?, lease_owner=?, '
                          'lease_epoch=?, lease_expires_at=? WHERE runs.run_id = ? AND '
                          'runs.lease_epoch = ?',
                          ('new_status',
                           'now',
                           'new_error',
                           'owner',
                           'epoch',
                           'expires',
                           'run_id',
                           'old_epoch'),
                          {},
                          ()),
            'run_claimable': ('SELECT runs.run_id, runs.workflow_name, runs.status, '
                              'runs.created_at, runs.updated_at, runs.head_checkpoint_id, '
                              'runs.signature, runs.max_supersteps, runs.error, runs.forked_from, '
                              'runs.workflow_ref, runs.lease_owner, runs.lease_epoch, '
                              'runs.lease_expires_at, runs.input_digest, runs.workflow_version, '
                              'runs.priority, runs.wake_at \n'
                              'FROM runs \n'
                              'WHERE runs.workflow_name = ? AND runs.workflow_version = ? AND '
                              '(runs.status = ? OR runs.status = ? AND (runs.lease_expires_at IS '
                              'NULL OR runs.lease_expires_at < ?)) ORDER BY runs.priority DESC, '
                              'runs.created_at, runs.run_id\n'
                              ' LIMIT ? OFFSET ?',
                              ('workflow_name',
                               'workflow_version',
                               'status_1',
                               'status_2',
                               'now',
                               'n',
                               'param_1'),
                              {'param_1': 0, 'status_1': 'queued', 'status_2': 'running'},
                              ('run_id',
                               'workflow_name',
                               'status',
                               'created_at',
                               'updated_at',
                               'head_checkpoint_id',
                               'signature',
                               'max_supersteps',
                               'error',
                               'forked_from',
                               'workflow_ref',
                               'lease_owner',
                               'lease_epoch',
                               'lease_expires_at',
                               'input_digest',
                               'workflow_version',
                               'priority',
                               'wake_at')),
            'run_get': ('SELECT runs.run_id, runs.workflow_name, runs.status, runs.created_at, '
                        'runs.updated_at, runs.head_checkpoint_id, runs.signature, '
                        'runs.max_supersteps, runs.error, runs.forked_from, runs.workflow_ref, '
                        'runs.lease_owner, runs.lease_epoch, runs.lease_expires_at, '
                        'runs.input_digest, runs.workflow_version, runs.priority, runs.wake_at \n'
                        'FROM runs \n'
                        'WHERE runs.run_id = ?',
                        ('run_id',),
                        {},
                        ('run_id',
                         'workflow_name',
                         'status',
                         'created_at',
                         'updated_at',
                         'head_checkpoint_id',
                         'signature',
                         'max_supersteps',
                         'error',
                         'forked_from',
                         'workflow_ref',
                         'lease_owner',
                         'lease_epoch',
                         'lease_expires_at',
                         'input_digest',
                         'workflow_version',
                         'priority',
                         'wake_at')),
            'run_get_locked': ('SELECT runs.run_id, runs.workflow_name, runs.status, '
                               'runs.created_at, runs.updated_at, runs.head_checkpoint_id, '
                               'runs.signature, runs.max_supersteps, runs.error, runs.forked_from, '
                               'runs.workflow_ref, runs.lease_owner, runs.lease_epoch, '
                               'runs.lease_expires_at, runs.input_digest, runs.workflow_version, '
                               'runs.priority, runs.wake_at \n'
                               'FROM runs \n'
                               'WHERE runs.run_id = ?',
                               ('run_id',),
                               {},
                               ('run_id',
                                'workflow_name',
                                'status',
                                'created_at',
                                'updated_at',
                                'head_checkpoint_id',
                                'signature',
                                'max_supersteps',
                                'error',
                                'forked_from',
                                'workflow_ref',
                                'lease_owner',
                                'lease_epoch',
                                'lease_expires_at',
                                'input_digest',
                                'workflow_version',
                                'priority',
                                'wake_at')),
            'run_insert': ('INSERT INTO runs (run_id, workflow_name, status, created_at, '
                           'updated_at, head_checkpoint_id, signature, max_supersteps, error, '
                           'forked_from, workflow_ref, lease_owner, lease_epoch, lease_expires_at, '
                           'input_digest, workflow_version, priority, wake_at) VALUES (?, ?, ?, ?, '
                           '?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                           ('run_id',
                            'workflow_name',
                            'status',
                            'created_at',
                            'updated_at',
                            'head_checkpoint_id',
                            'signature',
                            'max_supersteps',
                            'error',
                            'forked_from',
                            'workflow_ref',
                            'lease_owner',
                            'lease_epoch',
                            'lease_expires_at',
                            'input_digest',
                            'workflow_version',
                            'priority',
                            'wake_at'),
                           {},
                           ()),
            'run_lease': ('SELECT runs.lease_owner, runs.lease_epoch, runs.lease_expires_at \n'
                          'FROM runs \n'
                          'WHERE runs.run_id = ?',
                          ('run_id',),
                          {},
                          ('lease_owner', 'lease_epoch', 'lease_expires_at')),
            'run_list': {(False, False): ('SELECT runs.run_id, runs.workflow_name, runs.status, '
                                          'runs.created_at, runs.updated_at, '
                                          'runs.head_checkpoint_id, runs.signature, '
                                          'runs.max_supersteps, runs.error, runs.forked_from, '
                                          'runs.workflow_ref, runs.lease_owner, runs.lease_epoch, '
                                          'runs.lease_expires_at, runs.input_digest, '
                                          'runs.workflow_version, runs.priority, runs.wake_at \n'
                                          'FROM runs ORDER BY runs.created_at DESC, runs.run_id '
                                          'DESC',
                                          (),
                                          {},
                                          ('run_id',
                                           'workflow_name',
                                           'status',
                                           'created_at',
                                           'updated_at',
                                           'head_checkpoint_id',
                                           'signature',
                                           'max_supersteps',
                                           'error',
                                           'forked_from',
                                           'workflow_ref',
                                           'lease_owner',
                                           'lease_epoch',
                                           'lease_expires_at',
                                           'input_digest',
                                           'workflow_version',
                                           'priority',
                                           'wake_at')),
                         (False, True): ('SELECT runs.run_id, runs.workflow_name, runs.status, '
                                         'runs.created_at, runs.updated_at, '
                                         'runs.head_checkpoint_id, runs.signature, '
                                         'runs.max_supersteps, runs.error, runs.forked_from, '
                                         'runs.workflow_ref, runs.lease_owner, runs.lease_epoch, '
                                         'runs.lease_expires_at, runs.input_digest, '
                                         'runs.workflow_version, runs.priority, runs.wake_at \n'
                                         'FROM runs \n'
                                         'WHERE runs.workflow_name = ? ORDER BY runs.created_at '
                                         'DESC, runs.run_id DESC',
                                         ('workflow_name',),
                                         {},
                                         ('run_id',
                                          'workflow_name',
                                          'status',
                                          'created_at',
                                          'updated_at',
                                          'head_checkpoint_id',
                                          'signature',
                                          'max_supersteps',
                                          'error',
                                          'forked_from',
                                          'workflow_ref',
                                          'lease_owner',
                                          'lease_epoch',
                                          'lease_expires_at',
                                          'input_digest',
                                          'workflow_version',
                                          'priority',
                                          'wake_at')),
                         (True, False): ('SELECT runs.run_id, runs.workflow_name, runs.status, '
                                         'runs.created_at, runs.updated_at, '
                                         'runs.head_checkpoint_id, runs.signature, '
                                         'runs.max_supersteps, runs.error, runs.forked_from, '
                                         'runs.workflow_ref, runs.lease_owner, runs.lease_epoch, '
                                         'runs.lease_expires_at, runs.input_digest, '
                                         'runs.workflow_version, runs.priority, runs.wake_at \n'
                                         'FROM runs \n'
                                         'WHERE runs.status = ? ORDER BY runs.created_at DESC, '
                                         'runs.run_id DESC',
                                         ('status',),
                                         {},
                                         ('run_id',
                                          'workflow_name',
                                          'status',
                                          'created_at',
                                          'updated_at',
                                          'head_checkpoint_id',
                                          'signature',
                                          'max_supersteps',
                                          'error',
                                          'forked_from',
                                          'workflow_ref',
                                          'lease_owner',
                                          'lease_epoch',
                                          'lease_expires_at',
                                          'input_digest',
                                          'workflow_version',
                                          'priority',
                                          'wake_at')),
                         (True, True): ('SELECT runs.run_id, runs.workflow_name, runs.status, '
                                        'runs.created_at, runs.updated_at, '
                                        'runs.head_checkpoint_id, runs.signature, '
                                        'runs.max_supersteps, runs.error, runs.forked_from, '
                                        'runs.workflow_ref, runs.lease_owner, runs.lease_epoch, '
                                        'runs.lease_expires_at, runs.input_digest, '
                                        'runs.workflow_version, runs.priority, runs.wake_at \n'
                                        'FROM runs \n'
                                        'WHERE runs.status = ? AND runs.workflow_name = ? ORDER BY '
                                        'runs.created_at DESC, runs.run_id DESC',
                                        ('status', 'workflow_name'),
                                        {},
                                        ('run_id',
                                         'workflow_name',
                                         'status',
                                         'created_at',
                                         'updated_at',
                                         'head_checkpoint_id',
                                         'signature',
                                         'max_supersteps',
                                         'error',
                                         'forked_from',
                                         'workflow_ref',
                                         'lease_owner',
                                         'lease_epoch',
                                         'lease_expires_at',
                                         'input_digest',
                                         'workflow_version',
                                         'priority',
                                         'wake_at'))},
            'run_set_status': ('UPDATE runs SET status=?, updated_at=? WHERE runs.run_id = ?',
                               ('new_status', 'now', 'run_id'),
                               {},
                               ()),
            'run_touch': ('UPDATE runs SET updated_at=? WHERE runs.run_id = ? AND runs.lease_epoch '
                          '= ? AND runs.lease_owner = ?',
                          ('now', 'run_id', 'epoch', 'owner'),
                          {},
                          ()),
            'run_touch_cas': ('UPDATE runs SET updated_at=? WHERE runs.run_id = ? AND '
                              'runs.lease_epoch = ? AND runs.lease_owner = ? AND '
                              'runs.head_checkpoint_id = ?',
                              ('now', 'run_id', 'epoch', 'owner', 'expect_head'),
                              {},
                              ()),
            'run_update': ('UPDATE runs SET status=?, updated_at=?, head_checkpoint_id=coalesce(?, '
                           'runs.head_checkpoint_id), error=? WHERE runs.run_id = ? AND '
                           'runs.lease_epoch = ? AND runs.lease_owner = ?',
                           ('new_status',
                            'now',
                            'new_head',
                            'new_error',
                            'run_id',
                            'epoch',
                            'owner'),
                           {},
                           ()),
            'run_update_cas': ('UPDATE runs SET status=?, updated_at=?, '
                               'head_checkpoint_id=coalesce(?, runs.head_checkpoint_id), error=? '
                               'WHERE runs.run_id = ? AND runs.lease_epoch = ? AND '
                               'runs.lease_owner = ? AND runs.head_checkpoint_id = ?',
                               ('new_status',
                                'now',
                                'new_head',
                                'new_error',
                                'run_id',
                                'epoch',
                                'owner',
                                'expect_head'),
                               {},
                               ()),
            'run_update_release': ('UPDATE runs SET status=?, updated_at=?, '
                                   'head_checkpoint_id=coalesce(?, runs.head_checkpoint_id), '
                                   'error=?, lease_owner=?, lease_expires_at=? WHERE runs.run_id = '
                                   '? AND runs.lease_epoch = ? AND runs.lease_owner = ?',
                                   ('new_status',
                                    'now',
                                    'new_head',
                                    'new_error',
                                    'lease_owner',
                                    'lease_expires_at',
                                    'run_id',
                                    'epoch',
                                    'owner'),
                                   {'lease_expires_at': None, 'lease_owner': None},
                                   ()),
            'run_update_release_cas': ('UPDATE runs SET status=?, updated_at=?, '
                                       'head_checkpoint_id=coalesce(?, runs.head_checkpoint_id), '
                                       'error=?, lease_owner=?, lease_expires_at=? WHERE '
                                       'runs.run_id = ? AND runs.lease_epoch = ? AND '
                                       'runs.lease_owner = ? AND runs.head_checkpoint_id = ?',
                                       ('new_status',
                                        'now',
                                        'new_head',
                                        'new_error',
                                        'lease_owner',
                                        'lease_expires_at',
                                        'run_id',
                                        'epoch',
                                        'owner',
                                        'expect_head'),
                                       {'lease_expires_at': None, 'lease_owner': None},
                                       ()),
            'step_delete': ('DELETE FROM steps WHERE steps.run_id = ? AND steps.checkpoint_id = ?',
                            ('run_id', 'checkpoint_id'),
                            {},
                            ()),
            'step_get': ('SELECT steps.name, steps.data \n'
                         'FROM steps \n'
                         'WHERE steps.run_id = ? AND steps.checkpoint_id = ? AND steps.node = ?',
                         ('run_id', 'checkpoint_id', 'node'),
                         {},
                         ('name', 'data')),
            'step_upsert': ('INSERT INTO steps (run_id, checkpoint_id, node, name, data, '
                            'created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, '
                            'checkpoint_id, node, name) DO UPDATE SET data = excluded.data, '
                            'created_at = excluded.created_at',
                            ('run_id', 'checkpoint_id', 'node', 'name', 'data', 'created_at'),
                            {},
                            ()),
            'tw_delete': ('DELETE FROM task_writes WHERE task_writes.run_id = ? AND '
                          'task_writes.checkpoint_id = ?',
                          ('run_id', 'checkpoint_id'),
                          {},
                          ()),
            'tw_get': ('SELECT task_writes.run_id, task_writes.checkpoint_id, task_writes.node, '
                       'task_writes.data, task_writes.created_at \n'
                       'FROM task_writes \n'
                       'WHERE task_writes.run_id = ? AND task_writes.checkpoint_id = ? ORDER BY '
                       'task_writes.node',
                       ('run_id', 'checkpoint_id'),
                       {},
                       ('run_id', 'checkpoint_id', 'node', 'data', 'created_at')),
            'tw_upsert': ('INSERT INTO task_writes (run_id, checkpoint_id, node, data, created_at) '
                          'VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, checkpoint_id, node) DO '
                          'UPDATE SET data = excluded.data, created_at = excluded.created_at',
                          ('run_id', 'checkpoint_id', 'node', 'data', 'created_at'),
                          {},
                          ()),
            'value_delete': ('DELETE FROM channel_values WHERE channel_values.run_id = ? AND '
                             'channel_values.thread = ? AND channel_values.channel = ? AND '
                             'channel_values.seq = ?',
                             ('run_id', 'thread', 'channel', 'seq'),
                             {},
                             ()),
            'value_get': ('SELECT channel_values.data \n'
                          'FROM channel_values \n'
                          'WHERE channel_values.run_id = ? AND channel_values.thread = ? AND '
                          'channel_values.channel = ? AND channel_values.seq = ?',
                          ('run_id', 'thread', 'channel', 'seq'),
                          {},
                          ('data',)),
            'value_insert': ('INSERT INTO channel_values (run_id, thread, channel, seq, data) '
                             'VALUES (?, ?, ?, ?, ?)',
                             ('run_id', 'thread', 'channel', 'seq', 'data'),
                             {},
                             ()),
            'value_keys': ('SELECT channel_values.channel, channel_values.seq \n'
                           'FROM channel_values \n'
                           'WHERE channel_values.run_id = ? AND channel_values.thread = ?',
                           ('run_id', 'thread'),
                           {},
                           ('channel', 'seq'))}}
