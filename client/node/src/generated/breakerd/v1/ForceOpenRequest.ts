// Original file: proto/breakerd/v1/breaker.proto


export interface ForceOpenRequest {
  'dependency'?: (string);
}

export interface ForceOpenRequest__Output {
  'dependency': (string);
}
