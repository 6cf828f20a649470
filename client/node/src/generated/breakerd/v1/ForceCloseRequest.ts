// Original file: proto/breakerd/v1/breaker.proto


export interface ForceCloseRequest {
  'dependency'?: (string);
}

export interface ForceCloseRequest__Output {
  'dependency': (string);
}
