"""The JetStream API request subjects the breakers recognise, one pattern each, with or without an API prefix
(ADR-19: `$JS.<prefix>.API.`)."""

import re

API = r"^\$JS\.(?:[^.]+\.)?API\."

ACCOUNT_INFO = re.compile(API + r"INFO$")

CREATE_SUBJECT = re.compile(API + r"STREAM\.CREATE\.[^.]+$")
UPDATE_SUBJECT = re.compile(API + r"STREAM\.UPDATE\.[^.]+$")
INFO_SUBJECT = re.compile(API + r"STREAM\.INFO\.[^.]+$")
CRUD_SUBJECT = re.compile(API + r"STREAM\.(?:CREATE|UPDATE|INFO|DELETE)\.[^.]+$")
NAMES_SUBJECT = re.compile(API + r"STREAM\.NAMES$")
NAMES_OR_LIST_SUBJECT = re.compile(API + r"STREAM\.(?:NAMES|LIST)$")
PURGE_SUBJECT = re.compile(API + r"STREAM\.PURGE\.[^.]+$")
MSG_GET_SUBJECT = re.compile(API + r"STREAM\.MSG\.GET\.[^.]+$")
MSG_DELETE_SUBJECT = re.compile(API + r"STREAM\.MSG\.DELETE\.[^.]+$")
DIRECT_GET_SUBJECT = re.compile(API + r"DIRECT\.GET\.[^.]+(?:\..+)?$")
ASSET_CREATE = re.compile(API + r"(?:STREAM|CONSUMER)\.(?:DURABLE\.)?CREATE\..+$")

CONSUMER_CREATE = re.compile(API + r"CONSUMER\.(?:DURABLE\.)?CREATE\.[^.]+(?:\.[^.]+)*$")
CONSUMER_INFO = re.compile(API + r"CONSUMER\.INFO\.[^.]+\.[^.]+$")
PULL_NEXT = re.compile(API + r"CONSUMER\.MSG\.NEXT\.[^.]+\.[^.]+$")
PAUSE_SUBJECT = re.compile(API + r"CONSUMER\.PAUSE\.[^.]+\.[^.]+$")
RESET_SUBJECT = re.compile(API + r"CONSUMER\.RESET\.[^.]+\.[^.]+$")

# KV buckets' and object stores' own streams (KV_<bucket>, OBJ_<store>) and their consumers
KV_CREATE = re.compile(API + r"STREAM\.CREATE\.KV_[^.]+$")
KV_PURGE = re.compile(API + r"STREAM\.PURGE\.KV_[^.]+$")
KV_MSG_GET = re.compile(API + r"STREAM\.MSG\.GET\.KV_[^.]+$")
KV_DIRECT_GET = re.compile(API + r"DIRECT\.GET\.KV_[^.]+(?:\..+)?$")
KV_CONSUMER_INFO = re.compile(API + r"CONSUMER\.INFO\.KV_[^.]+\.[^.]+$")
KV_CONSUMER_CREATE = re.compile(API + r"CONSUMER\.(?:DURABLE\.)?CREATE\.KV_[^.]+(?:\..+)?$")
OBJ_CREATE = re.compile(API + r"STREAM\.CREATE\.OBJ_[^.]+$")
OBJ_PURGE = re.compile(API + r"STREAM\.PURGE\.OBJ_[^.]+$")
OBJ_MSG_GET = re.compile(API + r"STREAM\.MSG\.GET\.OBJ_[^.]+$")
OBJ_CONSUMER_CREATE = re.compile(API + r"CONSUMER\.(?:DURABLE\.)?CREATE\.OBJ_[^.]+(?:\..+)?$")
# Consumer creates on the run's own streams (not a bucket's): the push consumers js.subscribe makes.
STREAM_CONSUMER_CREATE = re.compile(API + r"CONSUMER\.(?:DURABLE\.)?CREATE\.(?!KV_|OBJ_)[^.]+(?:\..+)?$")
