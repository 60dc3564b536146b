"""The values every part of zuka speaks in: the frozen models, the errors naming a field, the
one parser of each typed field, text from outside made safe, secrets refused at input."""
